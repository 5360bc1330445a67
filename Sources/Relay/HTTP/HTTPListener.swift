import CLibevent
import CStreamIO
import Glibc
import StunCodec

/// One evhttp server on the main thread's `event_base`: reads each request into an
/// `HTTPRequest`, asks the router, writes the `HTTPResponse` back. evhttp enforces the size
/// limits (413 for bodies above `APIRouter.maxBodyBytes`) and the idle timeout.
final class HTTPListener {
    let http: OpaquePointer
    private let base: OpaquePointer
    let router: APIRouter
    let kind: APIRouter.Listener
    private(set) var boundAddresses: [TransportAddress] = []

    /// Headers beyond this are refused by evhttp itself; up to it the router answers 431 above
    /// `APIRouter.maxHeaderBytes`.
    static let hardHeaderLimit = 65536
    /// Seconds a connection may stay idle or take to send a request.
    static let timeoutSeconds: Int32 = 10

    init?(base: OpaquePointer, router: APIRouter, kind: APIRouter.Listener) {
        guard let http = evhttp_new(base) else { return nil }
        self.http = http
        self.base = base
        self.router = router
        self.kind = kind
        evhttp_set_max_headers_size(http, Self.hardHeaderLimit)
        evhttp_set_max_body_size(http, APIRouter.maxBodyBytes)
        evhttp_set_timeout(http, Self.timeoutSeconds)
        // Every method reaches the router, which answers 405 with an Allow header.
        let methods =
            EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_POST.rawValue | EVHTTP_REQ_HEAD.rawValue | EVHTTP_REQ_PUT.rawValue
            | EVHTTP_REQ_DELETE.rawValue | EVHTTP_REQ_OPTIONS.rawValue | EVHTTP_REQ_TRACE.rawValue
            | EVHTTP_REQ_CONNECT.rawValue | EVHTTP_REQ_PATCH.rawValue
        evhttp_set_allowed_methods(http, UInt16(methods))
        // Read an oversized body to its end before answering 413, so the client sees the answer.
        _ = evhttp_set_flags(http, EVHTTP_SERVER_LINGERING_CLOSE)
        evhttp_set_gencb(
            http,
            { request, arg in
                guard let request, let arg else { return }
                Unmanaged<HTTPListener>.fromOpaque(arg).takeUnretainedValue().respond(to: request)
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// The bound sockets' evhttp handles.
    private var handles: [(address: TransportAddress, handle: OpaquePointer)] = []

    deinit { evhttp_free(http) }

    /// Serves HTTPS from now on: each new connection gets a TLS session of `tls` (a reload
    /// passes the new context; connections already open keep theirs).
    func useTLS(_ tls: TLSContext) {
        evhttp_set_bevcb(
            http, { base, arg in relayd_https_bufferevent(base, arg) },
            UnsafeMutableRawPointer(tls.context))
    }

    /// Binds a listening socket, or accepts on `inherited`, one a live upgrade handed over
    /// (docs/live-upgrade.md); false when the address is taken or not local.
    func bind(_ address: TransportAddress, inherited: Int32? = nil) -> Bool {
        let handle: OpaquePointer?
        if let inherited {
            _ = fcntl(inherited, F_SETFL, fcntl(inherited, F_GETFL) | O_NONBLOCK)
            handle = evhttp_accept_socket_with_handle(http, inherited)
        } else {
            handle = evhttp_bind_socket_with_handle(http, "\(address.ip)", address.port)
        }
        guard let handle else { return false }
        boundAddresses.append(address)
        handles.append((address, handle))
        return true
    }

    /// Where connections the loops pass on come from, for the API on a TURN port: their
    /// clients' addresses are looked up there.
    private(set) var handoff: APIHandoff?
    /// The handoff's listener: this process's own, never handed to a live upgrade's heir.
    private var handoffListener: OpaquePointer?

    /// Serves the connections the loops pass on from TURN's port (`APIHandoff`), in the clear:
    /// the loop holds the TLS session. False (errno set) when the listener cannot be made.
    func listen(handoff: APIHandoff) -> Bool {
        guard let fd = handoff.takeListener() else {
            errno = handoff.listenError
            return false
        }
        // Backlog 0: the socket listens already, with its own backlog.
        guard let listener = evconnlistener_new(base, nil, nil, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd)
        else {
            Glibc.close(fd)
            return false
        }
        guard evhttp_bind_listener(http, listener) != nil else {
            evconnlistener_free(listener)
            return false
        }
        self.handoff = handoff
        handoffListener = listener
        return true
    }

    /// The listening sockets and their addresses, for a live upgrade's heir.
    var listeningSockets: [(address: TransportAddress, fd: Int32)] {
        handles.map { ($0.address, evhttp_bound_socket_get_fd($0.handle)) }
    }

    /// Stops accepting: the heir of a live upgrade does now. Open connections are served on.
    func closeListeningSockets() {
        for (_, handle) in handles { evhttp_del_accept_socket(http, handle) }
        handles.removeAll()
    }

    func respond(to req: OpaquePointer) {
        let response: HTTPResponse
        if var request = Self.read(req) {
            if let handoff {
                // Only the loops connect here: anyone else on the host is refused.
                guard let client = Self.client(of: req, in: handoff) else {
                    return Self.send(.error(403, "forbidden", "not a connection relayd's loops passed on"), to: req)
                }
                request.clientIP = client
            }
            response = router.handle(request, on: kind, now: Int64(time(nil)), monotonic: Self.monotonicSeconds())
        } else {
            response = .error(400, "bad_request", "the request could not be read")
        }
        Self.send(response, to: req)
    }

    /// The client a loop passed `req`'s connection on for, as the router names clients: its
    /// address; nil when no loop registered the connection.
    static func client(of req: OpaquePointer, in handoff: APIHandoff) -> String? {
        guard let connection = evhttp_request_get_connection(req),
            let bufferevent = evhttp_connection_get_bufferevent(connection),
            let client = handoff.client(ofAccepted: bufferevent_getfd(bufferevent))
        else { return nil }
        return "\(client.ip)"
    }

    /// Seconds on CLOCK_MONOTONIC: the router's clock for rate limits, sessions and rates.
    static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1_000_000_000
    }

    /// The request as the router sees it; nil when evhttp has no URI for it.
    static func read(_ req: OpaquePointer) -> HTTPRequest? {
        guard let method = method(evhttp_request_get_command(req)), let uri = evhttp_request_get_evhttp_uri(req)
        else { return nil }
        let path = evhttp_uri_get_path(uri).map { String(cString: $0) } ?? ""
        let query = evhttp_uri_get_query(uri).map { String(cString: $0) }

        var headers: [(name: String, value: String)] = []
        var field = evhttp_request_get_input_headers(req)?.pointee.tqh_first
        while let f = field {
            headers.append((String(cString: f.pointee.key), String(cString: f.pointee.value)))
            field = f.pointee.next.tqe_next
        }

        var body: [UInt8] = []
        if let input = evhttp_request_get_input_buffer(req) {
            let length = evbuffer_get_length(input)
            if length > 0 {
                body = [UInt8](repeating: 0, count: length)
                let copied = body.withUnsafeMutableBytes { evbuffer_copyout(input, $0.baseAddress, length) }
                body.removeLast(length - max(0, copied))
            }
        }

        var clientIP = "unknown"
        if let connection = evhttp_request_get_connection(req) {
            var address: UnsafeMutablePointer<CChar>? = nil
            var port: UInt16 = 0
            evhttp_connection_get_peer(connection, &address, &port)
            if let address { clientIP = String(cString: address) }
        }
        return HTTPRequest(
            method: method, path: path.isEmpty ? "/" : path, query: query, headers: headers, body: body,
            clientIP: clientIP)
    }

    static func method(_ command: evhttp_cmd_type) -> HTTPRequest.Method? {
        switch command {
        case EVHTTP_REQ_GET: return .get
        case EVHTTP_REQ_HEAD: return .head
        case EVHTTP_REQ_POST: return .post
        case EVHTTP_REQ_PUT: return .put
        case EVHTTP_REQ_DELETE: return .delete
        case EVHTTP_REQ_OPTIONS: return .options
        case EVHTTP_REQ_PATCH: return .patch
        case EVHTTP_REQ_TRACE: return .trace
        case EVHTTP_REQ_CONNECT: return .connect
        default: return nil
        }
    }

    static func send(_ response: HTTPResponse, to req: OpaquePointer) {
        if let out = evhttp_request_get_output_headers(req) {
            for header in response.headers { evhttp_add_header(out, header.name, header.value) }
        }
        guard let buffer = evbuffer_new() else {
            evhttp_send_error(req, 500, nil)
            return
        }
        defer { evbuffer_free(buffer) }
        _ = response.body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }
        evhttp_send_reply(req, Int32(response.status), HTTPResponse.reason(response.status), buffer)
    }
}
