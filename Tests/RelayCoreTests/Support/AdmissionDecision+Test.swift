import RelayCore

extension AdmissionDecision {
    /// The lease of a grant; nil for a refusal or a pending answer.
    var grantedLease: AdmissionLease? {
        if case .granted(let lease) = self { return lease }
        return nil
    }

    /// Why it was refused; nil for a grant or a pending answer.
    var refusalReason: AdmissionRefusal.Reason? {
        if case .refused(let refusal) = self { return refusal.reason }
        return nil
    }
}
