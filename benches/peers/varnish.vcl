# Varnish 7 as the caching proxy peer (issue 10): its built-in VCL (which caches GET/HEAD
# without Cookie or Authorization, honours Cache-Control, and uses the default ttl given with
# `-t`), the origin as its one backend, X-Cache added as ours and nginx's are.
# ${VARS} are filled in by benches/*.sh (envsubst).
vcl 4.1;

backend origin {
    .host = "127.0.0.1";
    .port = "${ORIGIN_PORT}";
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
