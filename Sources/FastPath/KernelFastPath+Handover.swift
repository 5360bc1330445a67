import CBPF
import Glibc
import Logging
import StunCodec

// The kernel fast path in a live upgrade (docs/live-upgrade.md, "Kernel fast path"): the heir
// loads its own program over the running relayd's maps, and swaps it into the running relayd's
// links with bpf_link_update, so the kernel relays every offloaded channel through the whole
// upgrade (one program or the other runs, over the same routes). Nothing is pinned: the links
// and maps live as long as some process holds them, and no stale route outlives both.
extension KernelFastPath {
    /// The maps the heir takes over, in the order a handover names them (their index): the
    /// routes and their counters of each family, and the program's statistics.
    package static let sharedMaps = [
        "relayd_channels_v4", "relayd_peers_v4", "relayd_channel_counters_v4", "relayd_peer_counters_v4",
        "relayd_channels_v6", "relayd_peers_v6", "relayd_channel_counters_v6", "relayd_peer_counters_v6",
        "relayd_stats",
    ]

    /// What an heir takes: map descriptors by name, tcx links and XDP links by interface index.
    package struct Handover: Sendable {
        package var maps: [String: Int32] = [:]
        package var links: [Int32: Int32] = [:]
        package var xdpLinks: [Int32: Int32] = [:]

        package init(maps: [String: Int32] = [:], links: [Int32: Int32] = [:], xdpLinks: [Int32: Int32] = [:]) {
            self.maps = maps
            self.links = links
            self.xdpLinks = xdpLinks
        }
    }

    /// The descriptors to hand over; nil when the program hangs on a clsact filter on some
    /// interface (a kernel before 6.6): a filter has no link to update, and the old process's
    /// detach at exit would remove the heir's.
    package func handover() -> Handover? {
        var handover = Handover()
        for attachment in attachments {
            guard case .link(let ifindex, let descriptor) = attachment else { return nil }
            handover.links[ifindex] = descriptor
        }
        for link in xdpLinks.withLock({ $0 }) { handover.xdpLinks[link.ifindex] = link.descriptor }
        for name in Self.sharedMaps {
            guard let map = bpf_object__find_map_by_name(objectPointer, name) else { return nil }
            handover.maps[name] = bpf_map__fd(map)
        }
        return handover
    }

    /// The heir's start: loads the program at `objectPath` over the handed-over maps and puts it
    /// into the handed-over links in place of the running relayd's. `interfaces` must be the
    /// links' interfaces (the attachment is restart-only). Takes the link descriptors; the map
    /// descriptors stay the caller's.
    package static func takeOver(
        _ handed: Handover, objectPath: String, interfaces: [String], localAddresses: Set<IPAddress>,
        egressInterfaces: [IPAddress: UInt32], logger: Logger
    ) throws(Failure) -> KernelFastPath {
        func closeLinks() { for fd in Array(handed.links.values) + Array(handed.xdpLinks.values) { close(fd) } }
        let wanted = Set(interfaces.map { Int32(bitPattern: if_nametoindex($0)) })
        guard wanted == Set(handed.links.keys) else {
            closeLinks()
            throw Failure(
                description: "the running relayd's program hangs on other interfaces than kernel-offload-interface "
                    + "names here (restart to change them)")
        }
        let fastPath: KernelFastPath
        do {
            fastPath = try KernelFastPath(
                objectPath: objectPath, localAddresses: localAddresses, egressInterfaces: egressInterfaces,
                reusing: handed.maps)
        } catch {
            closeLinks()
            throw error
        }
        // From here the links are the fast path's: its deinit closes them.
        for (ifindex, fd) in handed.links { fastPath.attachments.append(.link(ifindex: ifindex, descriptor: fd)) }
        for (ifindex, fd) in handed.xdpLinks {
            fastPath.xdpLinks.withLock { $0.append(XDPLink(ifindex: ifindex, descriptor: fd)) }
        }
        if !handed.xdpLinks.isEmpty {
            fastPath.linkLayer = { destination, egress in KernelFastPath.resolveLinkLayer(destination, egress: egress) }
        }
        try fastPath.updateLinks()
        logger.info(
            "kernel fast path taken over from the running relayd",
            metadata: [
                "event": "fastpath_taken_over", "object": "\(objectPath)", "links": "\(handed.links.count)",
                "xdp_links": "\(handed.xdpLinks.count)",
            ])
        return fastPath
    }

    /// Puts this process's programs into every link (the heir's take-over, or the running
    /// relayd's own back when its heir failed).
    package func updateLinks() throws(Failure) {
        for attachment in attachments {
            guard case .link(let ifindex, let descriptor) = attachment else { continue }
            let result = bpf_link_update(descriptor, programDescriptor, nil)
            guard result == 0 else {
                throw Failure(description: "bpf_link_update on interface \(ifindex): \(String(cString: strerror(-result)))")
            }
        }
        for link in xdpLinks.withLock({ $0 }) {
            let result = bpf_link_update(link.descriptor, xdpProgramDescriptor, nil)
            guard result == 0 else {
                throw Failure(
                    description: "bpf_link_update on interface \(link.ifindex) (XDP): \(String(cString: strerror(-result)))")
            }
        }
    }
}
