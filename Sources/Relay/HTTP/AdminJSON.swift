import RelayCore

/// The admin API's response bodies (docs/admin.md, docs/openapi.yaml).
extension APIRouter {
    static func allocationsJSON(_ page: [AllocationRecord], total: Int, next: String?) -> String {
        var w = JSONWriter()
        w.object { o in
            o.key("allocations")
            o.array { a in for record in page { write(record, to: &a) } }
            o.field("count", page.count)
            o.field("total", total)
            o.key("next_cursor")
            if let next { o.value(next) } else { o.raw("null") }
        }
        return w.text
    }

    static func write(_ r: AllocationRecord, to w: inout JSONWriter) {
        w.object { o in
            o.field("session", r.session)
            o.field("user", r.user)
            if !r.tenant.isEmpty { o.field("tenant", r.tenant) }
            o.field("transport", r.fiveTuple.transport.label)
            o.field("client", "\(r.fiveTuple.client)")
            o.field("server", "\(r.fiveTuple.server)")
            o.field("relayed", strings: r.relayed.map { "\($0)" })
            o.field("age_seconds", Int(r.ageSeconds))
            o.field("remaining_seconds", Int(r.remainingSeconds))
            o.key("mobile")
            o.raw(r.mobile ? "true" : "false")
            o.field("thread", r.thread)
            o.key("permissions")
            o.array { a in
                for p in r.permissions {
                    a.object { e in
                        e.field("peer", "\(p.peer)")
                        e.field("remaining_seconds", Int(p.remainingSeconds))
                    }
                }
            }
            o.key("channels")
            o.array { a in
                for c in r.channels {
                    a.object { e in
                        e.field("number", Int(c.number))
                        e.field("peer", "\(c.peer)")
                        e.field("remaining_seconds", Int(c.remainingSeconds))
                    }
                }
            }
            o.key("traffic")
            o.object { t in
                t.key("packets_to_peer")
                t.raw("\(r.traffic.packetsToPeer)")
                t.key("bytes_to_peer")
                t.raw("\(r.traffic.bytesToPeer)")
                t.key("packets_to_client")
                t.raw("\(r.traffic.packetsToClient)")
                t.key("bytes_to_client")
                t.raw("\(r.traffic.bytesToClient)")
            }
        }
    }

    static func terminatedJSON(_ count: Int) -> String { "{\"terminated\":\(count)}" }

    static func blockJSON(_ entry: UserBlocklist.Entry) -> String {
        var w = JSONWriter()
        w.object { o in
            o.field("user", entry.user)
            o.key("blocked")
            o.raw("true")
            o.field("until", Int(entry.until))
            if !entry.setBy.isEmpty { o.field("set_by", entry.setBy) }
            if entry.setAt > 0 { o.field("set_at", Int(entry.setAt)) }
        }
        return w.text
    }

    static func blocksJSON(_ entries: [UserBlocklist.Entry]) -> String {
        var w = JSONWriter()
        w.object { o in
            o.key("blocks")
            o.array { a in
                for e in entries {
                    a.object { b in
                        b.field("user", e.user)
                        b.field("until", Int(e.until))
                        if !e.setBy.isEmpty { b.field("set_by", e.setBy) }
                        if e.setAt > 0 { b.field("set_at", Int(e.setAt)) }
                    }
                }
            }
        }
        return w.text
    }
}
