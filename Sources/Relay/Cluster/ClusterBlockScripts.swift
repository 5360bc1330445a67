/// The Lua scripts that change and read the cluster's blocks atomically (docs/admin.md, "Blocks
/// that last"; keys in `ClusterKeys`). A block or lift carries the time it was made (`setAt`):
/// the later one wins wherever and whenever it arrives, so a change sent again after a lost
/// reply, a node's table merged back after Redis lost it, or a node back from a partition never
/// undoes a newer change (node clocks are assumed in step, as for the REST credentials' expiry).
enum ClusterBlockScripts {
    /// Users kept in the change log: a node that missed more changes than this reads the whole
    /// table.
    static let logLength = 10_000

    /// Sets entries unless Redis holds a newer one for the user (a later `setAt`; with ARGV[1]
    /// "merge", also one of the same second, so a node's old copy never undoes a change made in
    /// the same second; an operator's change, "change", wins such a tie). Each change bumps the
    /// version and logs the user. Returns, for each entry refused, its user and the value Redis
    /// holds, so the sender takes it (an empty array: all landed).
    /// KEYS[1] blocks, KEYS[2] version, KEYS[3] log; ARGV[1] "merge" or "change", then user,
    /// value, user, value…
    static let set = """
        local refused = {}
        local changed = 0
        for i = 2, #ARGV, 2 do
          local user, value = ARGV[i], ARGV[i + 1]
          local current = redis.call('HGET', KEYS[1], user)
          local keep = false
          if current then
            local at = tonumber(string.match(current, '^%S+ (%S+)'))
            local mine = tonumber(string.match(value, '^%S+ (%S+)'))
            if current == value then
              keep = true
            elseif at and mine and (at > mine or (at == mine and ARGV[1] == 'merge')) then
              keep = true
              table.insert(refused, user)
              table.insert(refused, current)
            end
          end
          if not keep then
            redis.call('HSET', KEYS[1], user, value)
            local version = redis.call('INCR', KEYS[2])
            redis.call('RPUSH', KEYS[3], version .. ':' .. user)
            changed = changed + 1
          end
        end
        if changed > 0 then redis.call('LTRIM', KEYS[3], -\(logLength), -1) end
        return refused
        """

    /// What changed since version ARGV[1] (-1: nothing known): `{version}` when nothing did,
    /// `{version, 'delta', user, value, …}` from the log, or `{version, 'full'}` when the log does
    /// not cover every version since (it was trimmed, Redis was reset below it, or something
    /// changed the version without logging): the caller then reads the table. The log's items
    /// are `version:user`. KEYS[1] blocks, KEYS[2] version, KEYS[3] log.
    static let since = """
        local version = tonumber(redis.call('GET', KEYS[2]) or '0')
        local since = tonumber(ARGV[1])
        if since == version then return {version} end
        local n = version - since
        if since < 0 or n < 0 or n > redis.call('LLEN', KEYS[3]) then return {version, 'full'} end
        local items = redis.call('LRANGE', KEYS[3], -n, -1)
        local first = tonumber(string.match(items[1] or '', '^(%d+):'))
        local last = tonumber(string.match(items[#items] or '', '^(%d+):'))
        if first ~= since + 1 or last ~= version then return {version, 'full'} end
        local out = {version, 'delta'}
        local seen = {}
        for _, item in ipairs(items) do
          local user = string.match(item, '^%d+:(.*)$') or ''
          if not seen[user] then
            seen[user] = true
            table.insert(out, user)
            table.insert(out, redis.call('HGET', KEYS[1], user) or '')
          end
        end
        return out
        """

    /// Removes entries that still hold exactly the value read (lifts and lapsed blocks old enough
    /// to forget), so one changed meanwhile stays. KEYS[1] blocks; ARGV user, value, …
    static let forget = """
        local removed = 0
        for i = 1, #ARGV, 2 do
          if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
            redis.call('HDEL', KEYS[1], ARGV[i])
            removed = removed + 1
          end
        end
        return removed
        """
}
