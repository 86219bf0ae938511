//! Request targets (RFC 9112 3.2): the absolute-form a client sends to a proxy, or a URL a
//! user gives the loader, split into its authority and the origin-form sent to a server.

use std::borrow::Cow;

/// Split an absolute-form target (`scheme "://" authority path-abempty ["?" query]`) into
/// its authority and its origin-form (path and query, `/` when the path is empty). `None`
/// when `target` has no `://`. A fragment is not removed: request targets have none (the
/// codec rejects them), and URL callers cut it first.
pub fn split_absolute(target: &str) -> Option<(&str, Cow<'_, str>)> {
    let rest = &target[target.find("://")? + 3..];
    Some(match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], Cow::Borrowed(&rest[i..])),
        // "http://host?q": the path is empty, so "/" and the query (RFC 9112 3.2.1, 3.3).
        // Rare enough (absolute-form is for proxies) that allocating here is fine.
        Some(i) => (&rest[..i], Cow::Owned(format!("/{}", &rest[i..]))),
        None => (rest, Cow::Borrowed("/")),
    })
}

/// The origin-form of a request target, for routing and for the upstream request line:
/// origin-form and `*` as they are, absolute-form reduced (see [`split_absolute`]).
pub fn origin_form(target: &str) -> Cow<'_, str> {
    if target.starts_with('/') || target == "*" {
        return Cow::Borrowed(target);
    }
    match split_absolute(target) {
        Some((_, path)) => path,
        None => Cow::Borrowed(target),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_form_of_targets() {
        assert_eq!(origin_form("/a?b"), "/a?b");
        assert_eq!(origin_form("*"), "*");
        assert_eq!(origin_form("http://h:80/p?q"), "/p?q");
        assert_eq!(origin_form("http://h"), "/");
        assert_eq!(origin_form("http://h?q"), "/?q");
        assert_eq!(origin_form("http://h:8080?a=1/2"), "/?a=1/2");
        assert_eq!(origin_form("h:80"), "h:80");
    }

    #[test]
    fn absolute_form_splits_at_the_path_or_query() {
        let split = |t| split_absolute(t).map(|(a, p)| (a, p.into_owned()));
        assert_eq!(split("http://h:80/p?q"), Some(("h:80", "/p?q".into())));
        assert_eq!(split("http://[::1]:81"), Some(("[::1]:81", "/".into())));
        assert_eq!(split("http://h?a=/"), Some(("h", "/?a=/".into())));
        assert_eq!(split("/p"), None);
    }
}
