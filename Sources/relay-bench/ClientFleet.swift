import Glibc
import StunCodec

/// Creates the benchmark's clients: one UDP socket (or TCP or TLS connection) each, connected to the server, with
/// REST credentials of their own.
enum ClientFleet {
    /// `count` clients; stops early (and says so) if the system runs out of sockets.
    /// For stream clients, made in batches: `first` is the index (and credentials) of the
    /// first one, `source` the address they connect from (the kernel's choice when nil). UDP
    /// fleets are made whole, from 0.
    static func make(
        count: Int, options: BenchOptions, bufferBytes: Int32, first: Int = 0, source: IPAddress? = nil
    ) -> [TurnClient] {
        var clients: [TurnClient] = []
        clients.reserveCapacity(count)
        let expiry = 86_400
        if options.transport != .udp {
            let context = options.transport == .tls ? ClientStream.makeContext() : nil
            if options.transport == .tls && context == nil {
                Report.note("cannot create a TLS client context")
                return []
            }
            for i in first..<first + count {
                guard let stream = ClientStream(context: context, server: options.server, source: source) else {
                    Report.note("\(options.transport) connection \(i + 1) to \(options.server) failed (errno \(errno))")
                    break
                }
                let credentials = options.credentials(client: i, validForSeconds: expiry)
                let client = TurnClient(index: i, fd: stream.fd, credentials: credentials)
                client.stream = stream
                clients.append(client)
            }
            if let context { ClientStream.releaseContext(context) }
            return clients
        }
        for i in 0..<count {
            let partner = i % 2 == 1 && options.partnerIP != nil
            let ip = partner ? options.partnerIP! : options.clientIP ?? options.server.ip
            let namespace = partner ? options.partnerNamespace : ""
            guard let fd = try? NetworkNamespace.run(in: namespace, { UDPEndpoint.open(ip: ip, bufferBytes: bufferBytes) }),
                options.direct || UDPEndpoint.connect(fd, to: options.server)
            else {
                Report.note("could only open \(i) of \(count) client sockets (errno \(errno)); raise ulimit -n")
                break
            }
            let credentials = options.credentials(client: i, validForSeconds: expiry)
            clients.append(TurnClient(index: i, fd: fd, credentials: credentials))
        }
        return clients
    }

    /// Closes every client's socket.
    static func close(_ clients: [TurnClient]) {
        for client in clients {
            if client.stream != nil {
                client.stream = nil  // ClientStream closes its socket
            } else {
                _ = Glibc.close(client.fd)
            }
        }
    }
}
