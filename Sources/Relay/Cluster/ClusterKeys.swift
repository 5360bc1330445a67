/// The cluster's Redis keys and the Lua scripts that read and change them atomically
/// (docs/cluster.md, "What is in Redis"). Every key a node writes carries a TTL it renews with
/// each heartbeat, so a node that dies leaves nothing behind after `cluster-node-ttl`.
enum ClusterKeys {
    static let prefix = "relayd:"
    /// A set of node names: who may have a registry entry or a quota share.
    static let registry = prefix + "nodes"
    static let nodePrefix = prefix + "node:"
    static let quotaPrefix = prefix + "quota:"
    /// In a quota share: the node's allocations in all, and per user (`u:<user>`).
    static let totalField = "#total"
    static func userField(_ user: String) -> String { "u:" + user }

    /// The cluster's blocks (docs/admin.md, "Blocks that last"): a hash of user to
    /// `until setAt by` (`BlockRecord`; a lift is an entry whose `until` is its `setAt`), a
    /// counter every change increments, which nodes poll, and the list of users changed, one per
    /// increment (the last `ClusterBlockScripts.logLength`). None has a TTL: blocks outlive every
    /// node. The scripts are in `ClusterBlockScripts`.
    static let blocks = prefix + "blocks"
    static let blocksVersion = prefix + "blocks:version"
    static let blocksLog = prefix + "blocks:log"

    static func node(_ name: String) -> String { nodePrefix + name }
    static func quota(_ name: String) -> String { quotaPrefix + name }

    /// The live nodes' entries (HGETALL of each); with ARGV[2] "1", a name whose entry expired
    /// leaves the set (a node's agent tidies; `relayd cluster status` only reads).
    /// KEYS[1] registry; ARGV[1] node key prefix, ARGV[2] "1" or "0".
    static let readFleet = """
        local out = {}
        for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
          local fields = redis.call('HGETALL', ARGV[1] .. name)
          if #fields == 0 then
            if ARGV[2] == '1' then redis.call('SREM', KEYS[1], name) end
          else
            table.insert(out, fields)
          end
        end
        return out
        """

    /// One Allocate against the quotas counted across the cluster: the user's and all
    /// allocations summed over every node's share; under both, this node's share counts it.
    /// Returns 0 (granted), 1 (`user-quota` reached) or 2 (`cluster-total-quota` reached).
    /// KEYS[1] registry; ARGV: quota key prefix, this node, user field, user quota, cluster
    /// total quota, TTL in ms.
    static let admit = """
        redis.call('SADD', KEYS[1], ARGV[2])
        local user, total = 0, 0
        for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
          local key = ARGV[1] .. name
          user = user + (tonumber(redis.call('HGET', key, ARGV[3])) or 0)
          total = total + (tonumber(redis.call('HGET', key, '#total')) or 0)
        end
        if tonumber(ARGV[5]) > 0 and total >= tonumber(ARGV[5]) then return 2 end
        if tonumber(ARGV[4]) > 0 and user >= tonumber(ARGV[4]) then return 1 end
        local own = ARGV[1] .. ARGV[2]
        redis.call('HINCRBY', own, ARGV[3], 1)
        redis.call('HINCRBY', own, '#total', 1)
        redis.call('PEXPIRE', own, ARGV[6])
        return 0
        """

    /// This node's share changed by field/delta pairs; fields at 0 or below go.
    /// KEYS[1] the share; ARGV[1] TTL in ms, then field, delta, field, delta…
    static let applyDeltas = """
        for i = 2, #ARGV, 2 do
          local v = redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
          if v <= 0 then redis.call('HDEL', KEYS[1], ARGV[i]) end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[1])
        return 1
        """

    /// This node's share written anew (after a reconnection: Redis may have lost it or kept a
    /// stale one). KEYS[1] the share; ARGV[1] TTL in ms, then field, count, field, count…
    static let replaceShare = """
        redis.call('DEL', KEYS[1])
        for i = 2, #ARGV, 2 do
          redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
        end
        if #ARGV > 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
        return 1
        """
}
