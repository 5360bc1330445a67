/// An HTTP request as the router sees it: already read off the connection by the evhttp glue,
/// so routing and the credential service are plain functions that tests call directly.
public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable {
        case get = "GET"
        case head = "HEAD"
        case post = "POST"
        case put = "PUT"
        case delete = "DELETE"
        case options = "OPTIONS"
        case patch = "PATCH"
        case trace = "TRACE"
        case connect = "CONNECT"
    }

    public var method: Method
    /// The path without the query, as sent (not percent-decoded).
    public var path: String
    /// The raw query string after `?`, if any.
    public var query: String?
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The caller's IP address as text, the rate-limit key of unauthenticated callers.
    public var clientIP: String

    public init(
        method: Method, path: String, query: String? = nil, headers: [(name: String, value: String)] = [],
        body: [UInt8] = [], clientIP: String = "127.0.0.1"
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.clientIP = clientIP
    }

    /// The first header named `name`, compared case-insensitively (RFC 9110 §5.1).
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    /// Bytes the header section takes on the wire (`name: value\r\n` per field).
    public var headerBytes: Int { headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } }
}

/// What the router answers: status, extra headers and body; the glue writes it out.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [Header]
    public var body: [UInt8]

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(status: Int, headers: [Header] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// A JSON body; never cached, since credential responses carry passwords.
    public static func json(_ status: Int, _ body: String, headers: [Header] = []) -> HTTPResponse {
        HTTPResponse(
            status: status,
            headers: [Header("Content-Type", "application/json"), Header("Cache-Control", "no-store")] + headers,
            body: Array(body.utf8))
    }

    /// A JSON error: `{"error":"<code>","message":"<text>"}`.
    public static func error(_ status: Int, _ code: String, _ message: String, headers: [Header] = []) -> HTTPResponse {
        var w = JSONWriter()
        w.object { o in
            o.field("error", code)
            o.field("message", message)
        }
        return json(status, w.text, headers: headers)
    }

    public static func text(_ status: Int, _ body: String, contentType: String = "text/plain; charset=utf-8")
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: [Header("Content-Type", contentType)], body: Array(body.utf8))
    }

    /// The standard reason phrase of the statuses this service sends.
    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 303: return "See Other"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 413: return "Content Too Large"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status \(status)"
        }
    }
}
