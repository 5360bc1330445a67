import CBPF
import CRelayFastPath
import Glibc
import RelayCore

/// RFC 6062 pipes spliced in the kernel (docs/tcp-relay.md, "In the kernel"): the sockmap
/// program `relayd_tcp_splice` loaded and attached to its sockmap, its control array mapped into
/// this process, and the sockmap's slots. A pipe takes a pair of slots (2k for its client's
/// socket, 2k+1 for its peer's); relayd's side of the protocol (when it may write, when the
/// program may redirect again) is the pipe's (`PipeSplice` in the Relay target).
///
/// Shared by every loop thread: the map calls are system calls the kernel serializes, the free
/// slots are under a lock, and each pair's control entries belong to the pipe's thread (and to
/// the allocation's end, under the pipe's own lock).
package final class KernelSplice: @unchecked Sendable {
    package typealias Failure = KernelFastPath.Failure

    private let object: OpaquePointer
    private let sockets: Int32
    private let slots: Int32
    private let counters: Int32
    private let control: UnsafeMutablePointer<relayd_splice_control>
    private let freePairs = Locked<[UInt32]>([])

    /// The slot pairs there are: a pipe each.
    package static let pairs = UInt32(RELAYD_SPLICE_SLOTS / 2)

    /// Where relayd looks for the program: beside the fast path's object (`kernel-offload-object`
    /// or its default places).
    package static func objectPath(besideFastPath fastPathObject: String) -> String {
        let directory = fastPathObject.lastIndex(of: "/").map { String(fastPathObject[..<$0]) } ?? "."
        return "\(directory)/relayd_tcp_splice.bpf.o"
    }

    /// Loads the program at `objectPath` and attaches it to its sockmap. The failure says why (no
    /// object, the kernel's refusal, missing privileges).
    package init(objectPath: String) throws(Failure) {
        guard access(objectPath, R_OK) == 0 else { throw Failure(description: "no BPF object at \(objectPath)") }
        let object = try KernelFastPath.loadObject(objectPath)
        func descriptor(_ name: String) -> Int32 {
            bpf_object__find_map_by_name(object, name).map { bpf_map__fd($0) } ?? -1
        }
        sockets = descriptor("relayd_splice_sockets")
        slots = descriptor("relayd_splice_slots")
        counters = descriptor("relayd_splice_counters")
        let controlMap = descriptor("relayd_splice_control")
        let program = bpf_object__find_program_by_name(object, "relayd_tcp_splice").map { bpf_program__fd($0) } ?? -1
        guard sockets >= 0, slots >= 0, counters >= 0, controlMap >= 0, program >= 0 else {
            bpf_object__close(object)
            throw Failure(description: "\(objectPath) is not relayd's splice program")
        }
        let length = Int(RELAYD_SPLICE_SLOTS) * MemoryLayout<relayd_splice_control>.stride
        let mapped = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, controlMap, 0)
        guard let mapped, mapped != MAP_FAILED else {
            bpf_object__close(object)
            throw Failure(description: "cannot map the splice control array: \(String(cString: strerror(errno)))")
        }
        let attached = relayd_splice_attach(program, sockets)
        guard attached == 0 else {
            munmap(mapped, length)
            bpf_object__close(object)
            throw Failure(description: "cannot attach the splice program: \(String(cString: strerror(-attached)))")
        }
        self.object = object
        control = mapped.assumingMemoryBound(to: relayd_splice_control.self)
        freePairs.withLock { $0 = Array((0..<Self.pairs).reversed()) }
    }

    deinit {
        munmap(control, Int(RELAYD_SPLICE_SLOTS) * MemoryLayout<relayd_splice_control>.stride)
        bpf_object__close(object)
    }

    /// A pipe's sockets in the sockmap: its pair's first slot, the sockets' cookies (the
    /// program's keys to the slots), and whether the peer's socket went in too.
    package struct Spliced: Sendable {
        package var first: UInt32
        package var cookies: [UInt64]
        package var peerInserted: Bool
    }

    /// Puts a pipe's two sockets in the sockmap, client first, with redirects off (`limit` 0:
    /// the program passes everything until `open`). Nil when no pair is free or the client's
    /// socket cannot go in (the pipe then stays in user space, nothing changed). If the peer's
    /// cannot (it may have closed meanwhile), the client's stays: taking a socket out of a
    /// sockmap drops what the program passed and relayd did not read yet.
    package func splice(client: Int32, peer: Int32) -> Spliced? {
        guard let pair = freePairs.withLock({ $0.popLast() }) else { return nil }  // the oldest freed
        var spliced = Spliced(first: pair * 2, cookies: [], peerInserted: false)
        for (offset, socket) in [client, peer].enumerated() {
            var slot = spliced.first + UInt32(offset)
            var cookie: UInt64 = 0
            var length = socklen_t(MemoryLayout<UInt64>.size)
            var value = UInt64(socket)
            (control + Int(slot)).pointee = relayd_splice_control()
            guard getsockopt(socket, SOL_SOCKET, SO_COOKIE, &cookie, &length) == 0,
                relayd_splice_reset_counters(counters, slot) == 0,
                bpf_map_update_elem(slots, &cookie, &slot, UInt64(BPF_ANY)) == 0
            else { break }
            guard bpf_map_update_elem(sockets, &slot, &value, UInt64(BPF_ANY)) == 0 else {
                _ = bpf_map_delete_elem(slots, &cookie)
                break
            }
            spliced.cookies.append(cookie)
            spliced.peerInserted = offset == 1
        }
        guard !spliced.cookies.isEmpty else {
            release(first: spliced.first)
            return nil
        }
        return spliced
    }

    /// Lets the program redirect both ways, each direction's target holding at most `limit`.
    package func open(first: UInt32, limit: UInt32) {
        relayd_splice_store_limit(control + Int(first), limit)
        relayd_splice_store_limit(control + Int(first + 1), limit)
    }

    /// Takes a pipe's sockets out of the sockmap (closing them does too); its counters stay as
    /// they are until `release`.
    package func unsplice(_ spliced: Spliced) {
        for offset in 0..<spliced.cookies.count {
            var slot = spliced.first + UInt32(offset)
            var cookie = spliced.cookies[offset]
            _ = bpf_map_delete_elem(sockets, &slot)
            _ = bpf_map_delete_elem(slots, &cookie)
        }
    }

    /// Frees a pipe's pair, once its counters were read for the last time. It is taken again
    /// last (the list is first in, first out): a run of the program that looked the old socket
    /// up just before it left the sockmap must not touch a new pipe's counts.
    package func release(first: UInt32) {
        freePairs.withLock { $0.insert(first / 2, at: 0) }
    }

    /// Whether `socket` may enter the sockmap now: an established TCP connection (only those may)
    /// with nothing unread in its receive queue (the program would see a segment relayd read in
    /// part whole again).
    package static func ready(_ socket: Int32) -> Bool {
        relayd_tcp_established(socket) == 1 && relayd_tcp_unread_bytes(socket) == 0
    }

    /// What the program did with the bytes `slot`'s socket received: redirected to the other
    /// side, passed to relayd, and taken out of retransmitted segments as received before
    /// (docs/tcp-relay.md, "Retransmitted bytes"). Nil if the map cannot be read.
    package func counts(slot: UInt32) -> Counts? {
        var redirected: UInt64 = 0
        var passed: UInt64 = 0
        var old: UInt64 = 0
        guard relayd_splice_read_counters(counters, slot, &redirected, &passed, &old) == 0 else { return nil }
        return Counts(redirected: redirected, passed: passed, old: old)
    }

    /// A slot's counts (`counts(slot:)`).
    package struct Counts: Sendable {
        package var redirected: UInt64
        package var passed: UInt64
        package var old: UInt64
    }

    /// Whether the program could not take a retransmitted segment's old bytes out for `slot`'s
    /// socket: the pipe cannot stay exact.
    package func broken(slot: UInt32) -> Bool { relayd_splice_load_broken(control + Int(slot)) != 0 }

    /// The control entry of `slot`, written by the pipe's thread with the header's atomic stores.
    package func control(slot: UInt32) -> UnsafeMutablePointer<relayd_splice_control> { control + Int(slot) }

    /// Bytes written into `socket`'s send queue since it connected (nil on error).
    package static func writtenBytes(_ socket: Int32) -> UInt64? {
        let bytes = relayd_tcp_written_bytes(socket)
        return bytes < 0 ? nil : UInt64(bytes)
    }
}
