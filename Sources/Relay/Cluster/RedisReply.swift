import CHiredis

/// One Redis reply (RESP2), copied out of hiredis's `redisReply` so it outlives the callback.
public indirect enum RedisReply: Sendable, Equatable {
    case string([UInt8])
    case status(String)
    case error(String)
    case integer(Int64)
    case array([RedisReply])
    case null

    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        func bytes() -> [UInt8] {
            guard let str = r.str, r.len > 0 else { return [] }
            return Array(UnsafeRawBufferPointer(start: str, count: r.len))
        }
        switch r.type {
        case REDIS_REPLY_STRING: self = .string(bytes())
        case REDIS_REPLY_STATUS: self = .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            elements.reserveCapacity(r.elements)
            for i in 0..<r.elements {
                if let element = r.element[i] { elements.append(RedisReply(element)) } else { elements.append(.null) }
            }
            self = .array(elements)
        default: self = .null
        }
    }

    /// A bulk string or status as text.
    public var text: String? {
        switch self {
        case .string(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        default: return nil
        }
    }

    public var integer: Int64? {
        if case .integer(let n) = self { return n }
        return nil
    }

    public var elements: [RedisReply]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var errorMessage: String? {
        if case .error(let message) = self { return message }
        return nil
    }
}

/// Calls a hiredis `…Argv` function with `arguments` as its argv/argvlen arrays (binary-safe;
/// hiredis copies the command before it returns).
func withRedisArgv<R>(
    _ arguments: [[UInt8]], _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
) -> R {
    let total = arguments.reduce(0) { $0 + $1.count }
    let storage = UnsafeMutablePointer<CChar>.allocate(capacity: max(total, 1))
    let argv = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: max(arguments.count, 1))
    let lengths = UnsafeMutablePointer<Int>.allocate(capacity: max(arguments.count, 1))
    defer {
        storage.deallocate()
        argv.deallocate()
        lengths.deallocate()
    }
    var offset = 0
    for (i, argument) in arguments.enumerated() {
        argument.withUnsafeBytes { raw in
            if let base = raw.baseAddress {
                UnsafeMutableRawPointer(storage + offset).copyMemory(from: base, byteCount: raw.count)
            }
        }
        argv[i] = UnsafePointer(storage + offset)
        lengths[i] = argument.count
        offset += argument.count
    }
    return body(Int32(arguments.count), argv, lengths)
}
