import CBPF
import Glibc

extension KernelFastPath {
    /// Opens the BPF object at `path` and loads it into the kernel, its maps named in `maps`
    /// replaced by those descriptors (a live upgrade's, docs/live-upgrade.md): the loaded object,
    /// or why not (the kernel's refusal, missing privileges). Shared by the fast path and the
    /// TCP splice (`KernelSplice`).
    static func loadObject(_ path: String, reusing maps: [String: Int32] = [:]) throws(Failure) -> OpaquePointer {
        guard let object = bpf_object__open_file(path, nil), libbpf_get_error(UnsafeRawPointer(object)) == 0 else {
            throw Failure(description: "cannot open BPF object \(path): \(String(cString: strerror(errno)))")
        }
        for (name, fd) in maps {
            guard let map = bpf_object__find_map_by_name(object, name), bpf_map__reuse_fd(map, fd) == 0 else {
                bpf_object__close(object)
                throw Failure(description: "cannot take over the map \(name) of the running relayd")
            }
        }
        let loaded = bpf_object__load(object)
        guard loaded == 0 else {
            bpf_object__close(object)
            throw Failure(description: "the kernel refused \(path): \(String(cString: strerror(-loaded)))")
        }
        return object
    }
}
