//! What an attempt on a server came to, as one value: the exchange marks a server failed
//! from it in one place (`attempts`), and the rules are plain functions tested here.

use super::duplex::Upload;
use super::response_head::{Head, HeadFail};
use super::InFlight;
use crate::config::route_opts::{RetryPolicy, RetryReason};
use crate::error::ProxyError;
use crate::pool::Upstream;
use crate::relay::RelayFail;

/// Whose fault a failed attempt was, for the balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Blame {
    /// The server's: it is marked failed and not tried again for this request.
    Server,
    /// Nobody's to count against a server: the client's, the proxy's own shortage, or a
    /// pooled connection that went stale while idle (the origin closed it unnoticed).
    Nobody,
}

impl Blame {
    /// A failure before any answer: the server's, unless the connection came from the pool.
    pub(super) fn unless_stale(reused: bool) -> Blame {
        if reused {
            Blame::Nobody
        } else {
            Blame::Server
        }
    }
}

/// A server's answer: its final response head, and what the relay needs with it.
pub(super) struct Answered<'w> {
    pub(super) server: crate::config::ServerId,
    /// The connection, and where the request body stands.
    pub(super) body: Body<'w>,
    pub(super) head: Head,
    /// The route's upstream timeouts (its own merged over `[timeouts]`): the body's reads.
    pub(super) timeouts: &'w crate::config::Timeouts,
    /// The server's room (`attempts` hands it to the attempt), held until the answer is
    /// relayed.
    pub(super) _in_flight: Option<InFlight<'w>>,
}

/// Where the request body stands once the answer's head came, with the upstream connection.
pub(super) enum Body<'w> {
    /// Sent whole (or there was none).
    Sent(Upstream),
    /// The upstream answered before it had it all, and refused the rest
    /// (`duplex::refuses`): it is abandoned, so the client connection closes after the answer
    /// (the rest is never read) and the upstream's is not reused.
    Refused(Upstream),
    /// The upstream answered before it had it all, without refusing it: the rest streams
    /// while the answer is relayed (`duplex`).
    Streams(Upload<'w>),
}

impl Body<'_> {
    /// The answer came before the whole body was sent.
    pub(super) fn early(&self) -> bool {
        !matches!(self, Body::Sent(_))
    }

    /// The connection; a body still streaming is abandoned.
    pub(super) fn into_upstream(self) -> Upstream {
        match self {
            Body::Sent(up) | Body::Refused(up) => up,
            Body::Streams(Upload { body, up }) => {
                // The body's future goes first: it points into `up`.
                drop(body);
                *up
            }
        }
    }
}

/// How one attempt on one server ended.
// Returned once per attempt and matched at once: boxing the answer would cost an allocation
// per proxied request to save a copy of ~200 bytes.
#[allow(clippy::large_enum_variant)]
pub(super) enum Attempt<'w> {
    Answered(Answered<'w>),
    /// Nothing of the request was taken, or it could be sent again: another try (another
    /// server, or a fresh connection) if the route's retry policy and the budget allow
    /// (`may_retry`); else the client is answered with `error`'s status.
    Retry {
        error: ProxyError,
        blame: Blame,
        why: RetryReason,
        /// Some of the request may have reached the server (else any method may go again).
        sent: bool,
    },
    /// The exchange ends: the client is answered with `error`'s status.
    Fail {
        error: ProxyError,
        blame: Blame,
    },
    /// The exchange ends and the client connection closes without an answer.
    Abort,
}

impl Attempt<'_> {
    pub(super) fn blame(&self) -> Blame {
        match self {
            Attempt::Retry { blame, .. } | Attempt::Fail { blame, .. } => *blame,
            Attempt::Answered(_) | Attempt::Abort => Blame::Nobody,
        }
    }
}

/// What not getting a response head comes to. `resend`: the request may be sent again if
/// nothing came back (no byte of a streamed body was sent, and the method is idempotent);
/// `reused`: the connection came from the pool.
pub(super) fn no_head(f: HeadFail, resend: bool, reused: bool) -> Attempt<'static> {
    match f {
        HeadFail::Nothing(_) if resend => Attempt::Retry {
            error: ProxyError::UpstreamClosed,
            blame: Blame::unless_stale(reused),
            why: if reused {
                RetryReason::Stale
            } else {
                RetryReason::Reset
            },
            sent: true,
        },
        // The upstream closed without answering, after taking what cannot be sent again.
        HeadFail::Nothing(_) => Attempt::Fail {
            error: ProxyError::UpstreamClosed,
            blame: Blame::unless_stale(reused),
        },
        // Retried only where the route asks (`on = ["timeout"]`): the request may be
        // running on the server. Never once a 103 reached the client: another server's
        // answer would follow hints that were not its own (and a POST would run twice).
        HeadFail::Timeout {
            interim_sent: false,
        } if resend => Attempt::Retry {
            error: ProxyError::UpstreamTimeout,
            blame: Blame::Server,
            why: RetryReason::Timeout,
            sent: true,
        },
        HeadFail::Timeout { .. } => Attempt::Fail {
            error: ProxyError::UpstreamTimeout,
            blame: Blame::Server,
        },
        HeadFail::Bad(error) => Attempt::Fail {
            error,
            blame: Blame::Server,
        },
        // The client left while an interim response went to it: nobody to answer.
        HeadFail::Client => Attempt::Abort,
    }
}

/// Whether an attempt that came to `Retry` may be followed by another under `policy`, for a
/// request whose method is `idempotent` (before the tries and the budget are counted). A
/// stale pooled connection is sent on again when nothing of the request reached it, or when
/// the method may be sent twice.
pub(super) fn may_retry(
    policy: &RetryPolicy,
    why: RetryReason,
    sent: bool,
    idempotent: bool,
) -> bool {
    match why {
        RetryReason::Stale => !sent || idempotent || policy.all_methods,
        _ => policy.allows(why, idempotent),
    }
}

/// What a failed relay of the request body comes to (the response head never came).
pub(super) fn body_failed(f: RelayFail) -> Attempt<'static> {
    match f {
        RelayFail::Client(error) => Attempt::Fail {
            error,
            blame: Blame::Nobody,
        },
        RelayFail::Upstream(error) => Attempt::Fail {
            error,
            blame: Blame::Server,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::http::CodecError;

    /// An attempt's outcome as comparable values: (what happens next, error, blame).
    fn settled(a: Attempt<'_>) -> (&'static str, Option<ProxyError>, Blame) {
        let blame = a.blame();
        match a {
            Attempt::Answered(_) => ("answered", None, blame),
            Attempt::Retry { error, .. } => ("retry", Some(error), blame),
            Attempt::Fail { error, .. } => ("fail", Some(error), blame),
            Attempt::Abort => ("abort", None, blame),
        }
    }

    #[test]
    fn what_no_response_head_comes_to() {
        use Blame::*;
        use ProxyError::*;
        let nothing = || HeadFail::Nothing(None);
        let timeout = |interim_sent| HeadFail::Timeout { interim_sent };
        let bad = BadResponse(CodecError::InvalidStatus);
        // (failure, may be sent again, pooled connection) -> outcome (a timeout that may be
        // sent again is retried only where the route's `retry` lists it: `may_retry`)
        let table = [
            // Nothing came back: sent again where safe; a pooled connection just went stale.
            (
                nothing(),
                true,
                false,
                ("retry", Some(UpstreamClosed), Server),
            ),
            (
                nothing(),
                true,
                true,
                ("retry", Some(UpstreamClosed), Nobody),
            ),
            (
                nothing(),
                false,
                false,
                ("fail", Some(UpstreamClosed), Server),
            ),
            (
                nothing(),
                false,
                true,
                ("fail", Some(UpstreamClosed), Nobody),
            ),
            // A timeout or a bad head is the server's, pooled or not.
            (
                timeout(false),
                true,
                false,
                ("retry", Some(UpstreamTimeout), Server),
            ),
            (
                timeout(false),
                false,
                true,
                ("fail", Some(UpstreamTimeout), Server),
            ),
            // A 103 reached the client: what it has is this server's.
            (
                timeout(true),
                true,
                false,
                ("fail", Some(UpstreamTimeout), Server),
            ),
            (HeadFail::Bad(bad), true, true, ("fail", Some(bad), Server)),
            (
                HeadFail::Bad(UpstreamIo),
                false,
                false,
                ("fail", Some(UpstreamIo), Server),
            ),
        ];
        for (f, resend, reused, want) in table {
            let what = format!("{f:?} resend={resend} reused={reused}");
            assert_eq!(settled(no_head(f, resend, reused)), want, "{what}");
        }
        // Who may go again: the built-in rule never retries a timeout, nor a POST whose
        // connection closed; a stale connection that took nothing goes again for any method.
        let built_in = &RetryPolicy::BUILT_IN;
        assert!(!may_retry(built_in, RetryReason::Timeout, true, true));
        assert!(may_retry(built_in, RetryReason::Reset, true, true));
        assert!(!may_retry(built_in, RetryReason::Reset, true, false));
        assert!(may_retry(built_in, RetryReason::Connect, false, false));
        assert!(may_retry(built_in, RetryReason::Stale, false, false));
        assert!(!may_retry(built_in, RetryReason::Stale, true, false));
        assert!(may_retry(built_in, RetryReason::Stale, true, true));
        assert_eq!(
            settled(body_failed(RelayFail::Client(BodyTimeout))),
            ("fail", Some(BodyTimeout), Nobody)
        );
        assert_eq!(
            settled(body_failed(RelayFail::Upstream(UpstreamIo))),
            ("fail", Some(UpstreamIo), Server)
        );
    }
}
