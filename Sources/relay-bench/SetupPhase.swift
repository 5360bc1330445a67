import StunCodec

/// The control-plane steps: allocate, point clients at their peers, CreatePermission and
/// ChannelBind, refresh, delete.
struct SetupPhase {
    let runner: TransactionRunner
    let options: BenchOptions

    init(clients: [TurnClient], options: BenchOptions) {
        runner = TransactionRunner(clients: clients, window: options.window)
        runner.server = options.server
        self.options = options
    }

    var clients: [TurnClient] { runner.clients }

    /// Allocate (unsigned → 401 → signed) for `indices`; records each relayed address.
    func allocate(_ indices: [Int], bufferBytes: Int32) -> SetupTally {
        runner.reopenBufferBytes = bufferBytes
        return runner.run(.allocate(lifetime: options.lifetime), on: indices) { client, message in
            guard let relayed = try? message.decode(XORRelayedAddress.self) else { return false }
            client.relayed = relayed.address
            return true
        }
    }

    /// CreatePermission then (unless Send indications are used) ChannelBind towards each client's peer.
    func connect(_ indices: [Int], channels: Bool) -> SetupTally {
        var tally = runner.run(.createPermission, on: indices)
        if channels { tally.merge(runner.run(.channelBind, on: indices)) }
        return tally
    }

    /// Refresh with the configured lifetime.
    func refresh(_ indices: [Int]) -> SetupTally {
        runner.run(.refresh(lifetime: options.lifetime), on: indices)
    }

    /// Deletes the allocations (Refresh with LIFETIME 0), giving up after `seconds`.
    func release(_ indices: [Int], seconds: Double = 3) -> SetupTally {
        let deadline = Clock.now() + UInt64(seconds * 1e9)
        return runner.run(.refresh(lifetime: 0), on: indices, deadlineNs: deadline)
    }
}
