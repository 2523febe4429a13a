/*
 * fuzz_admin_request.c - what the admin port decides about a request
 * (lb_admin_request_check), on arbitrary bytes: the function the evhttp
 * callback calls with the bytes a connection sent for one request, so the
 * paths, methods, headers and bodies fuzzed here are parsed by exactly the
 * code lb runs.
 *
 * The first byte picks what the port accepts (its listen address, token
 * and allowed_hosts); the rest is the request. Checked: the same bytes get
 * the same verdict; a verdict is either a route or a complete refusal (a
 * known status with its reason, a one-line message that goes into JSON
 * unescaped, Allow with a 405, a challenge with a 401, close only with a
 * 400); and what a route promises can be seen in the bytes: a head that
 * ends, a request line "METHOD /target HTTP/1.x", no NUL or
 * Transfer-Encoding in the head, the method the route wants, the token
 * when one is set, pool and server names that are path segments, and the
 * path's last word for a write (an action's name, /weight, ...). A 405's
 * Allow is a list of methods without the one sent, and its message names
 * the first.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <strings.h>

#include "admin_request.h"
#include "fuzz.h"

struct fuzz_port {
    const char *listen;             /* as written */
    int family;
    const char *addr;               /* its address */
    const char *token;
    const char *heartbeat_token;
    const char *hosts[2];
};

static const struct fuzz_port fuzz_ports[] = {
    { "127.0.0.1:9900", AF_INET, "127.0.0.1", "", "", { NULL, NULL } },
    { "127.0.0.1:9900", AF_INET, "127.0.0.1", "s3cr3t", "", { "lb.example.com", "10.0.0.5" } },
    { "[::1]:9900", AF_INET6, "::1", "", "hb", { NULL, NULL } },
    { "0.0.0.0:9900", AF_INET, "0.0.0.0", "t", "hb", { NULL, NULL } },
    { "[::]:9900", AF_INET6, "::", "s3cr3t", "", { "[fe80::1]", NULL } },
    { "localhost:9900", AF_INET, "127.0.0.1", "", "", { "x", NULL } },
};

static void
fuzz_port_admin(const struct fuzz_port *p, struct conf_admin *a)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->listen.text, sizeof(a->listen.text), "%s", p->listen);
    a->listen.ss.ss_family = (sa_family_t)p->family;
    if (p->family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&a->listen.ss;
        FUZZ_CHECK(inet_pton(AF_INET, p->addr, &in->sin_addr) == 1);
        in->sin_port = htons(9900);
        a->listen.len = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->listen.ss;
        FUZZ_CHECK(inet_pton(AF_INET6, p->addr, &in6->sin6_addr) == 1);
        in6->sin6_port = htons(9900);
        a->listen.len = sizeof(*in6);
    }
    a->token = (char *)p->token;
    a->heartbeat_token = (char *)p->heartbeat_token;
    for (size_t i = 0; i < 2 && p->hosts[i] != NULL; i++)
        snprintf(a->allowed_hosts.names[a->allowed_hosts.n++], CONF_HOST_MAX + 1, "%s",
                 p->hosts[i]);
}

/* A literal that goes into JSON and a status line without escaping. */
static void
fuzz_check_literal(const char *s)
{
    FUZZ_CHECK(s != NULL && s[0] != '\0');
    for (; *s != '\0'; s++)
        FUZZ_CHECK(*s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\');
}

static bool
fuzz_has(const char *p, size_t len, const char *needle)
{
    return memmem(p, len, needle, strlen(needle)) != NULL;
}

/* The value of the header line named name (any case) in the header lines
 * of head[0..len), as sent (after "name:"), up to its line end; NULL when
 * there is none. */
static const char *
fuzz_header(const char *head, size_t len, const char *name, size_t *vlen)
{
    size_t n = strlen(name);

    for (const char *p = head; p < head + len;) {
        const char *nl = memchr(p, '\n', (size_t)(head + len - p));
        size_t line = nl != NULL ? (size_t)(nl - p) : (size_t)(head + len - p);

        if (line > 0 && p[line - 1] == '\r')
            line--;
        if (line > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
            *vlen = line - n - 1;
            return p + n + 1;
        }
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return NULL;
}

/* A pool or server name taken from the path: at most CONF_NAME_MAX bytes
 * of a path segment (empty when the segment was longer). */
static void
fuzz_check_name(const char *name, const char *target, size_t target_len)
{
    size_t n = strnlen(name, CONF_NAME_MAX + 1);

    FUZZ_CHECK(n <= CONF_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(name[i] > ' ' && name[i] < 0x7f && name[i] != '/' && name[i] != '?');
    if (n > 0)
        FUZZ_CHECK(fuzz_has(target, target_len, name));
}

/* The request's Authorization header carries token: "Bearer", spaces, the
 * token, its line's end. */
static bool
fuzz_has_bearer(const char *headers, size_t hlen, const char *token)
{
    size_t vlen, tlen = strlen(token);
    const char *auth = fuzz_header(headers, hlen, "authorization", &vlen);

    if (auth == NULL || vlen < tlen + 7 || memcmp(auth + vlen - tlen, token, tlen) != 0 ||
        auth[vlen - tlen - 1] != ' ')
        return false;
    while (*auth == ' ' || *auth == '\t')
        auth++;
    return strncasecmp(auth, "bearer ", 7) == 0;
}

/* indexed by enum lb_admin_action: the README's words, not the table's */
static const char *const fuzz_actions[] = { "/enable", "/drain", "/disable" };

/* The path of target[0..end) (its query left out) ends with tail. */
static bool
fuzz_path_ends(const char *target, const char *end, const char *tail)
{
    const char *q = memchr(target, '?', (size_t)(end - target));
    size_t n = strlen(tail), len = (size_t)((q != NULL ? q : end) - target);

    return len >= n && memcmp(target + len - n, tail, n) == 0;
}

static void
fuzz_check_route(const struct conf_admin *a, const char *raw, size_t len,
                 const struct lb_admin_verdict *v)
{
    const char *end = memmem(raw, len, "\n\r\n", 3), *end2 = memmem(raw, len, "\n\n", 2);
    const char *eol = memchr(raw, '\n', len), *sp1, *sp2;
    size_t head, hlen, vlen, tlen = strlen(a->token);

    if (end == NULL || (end2 != NULL && end2 < end))
        end = end2;
    FUZZ_CHECK(end != NULL && eol != NULL);     /* the head ends */
    head = (size_t)(end - raw);
    FUZZ_CHECK(memchr(raw, '\0', head) == NULL);
    /* the header lines: after the request line's end, up to the end of
     * the last one (end points at it) */
    hlen = (size_t)(end - eol);
    FUZZ_CHECK(fuzz_header(eol + 1, hlen, "transfer-encoding", &vlen) == NULL);
    /* METHOD SP /target SP HTTP/1.x */
    sp1 = memchr(raw, ' ', (size_t)(eol - raw));
    FUZZ_CHECK(sp1 != NULL && sp1[1] == '/');
    sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
    FUZZ_CHECK(sp2 != NULL);
    FUZZ_CHECK(strncmp(sp2, " HTTP/1.1", 9) == 0 || strncmp(sp2, " HTTP/1.0", 9) == 0);
    switch (v->route) {
    case LB_ADMIN_ROUTE_ACTION:
    case LB_ADMIN_ROUTE_RELOAD:
    case LB_ADMIN_ROUTE_SERVER_ADD:
    case LB_ADMIN_ROUTE_SERVER_WEIGHT:
    case LB_ADMIN_ROUTE_SERVER_DELETE:
    case LB_ADMIN_ROUTE_HEARTBEAT:
        if (v->route == LB_ADMIN_ROUTE_SERVER_DELETE)
            FUZZ_CHECK(sp1 - raw == 6 && memcmp(raw, "DELETE", 6) == 0);
        else
            FUZZ_CHECK(sp1 - raw == 4 && memcmp(raw, "POST", 4) == 0);
        if (v->route == LB_ADMIN_ROUTE_HEARTBEAT) {
            /* the operator's token or the heartbeat_token */
            if (tlen > 0 || a->heartbeat_token[0] != '\0')
                FUZZ_CHECK((tlen > 0 && fuzz_has_bearer(eol + 1, hlen, a->token)) ||
                           (a->heartbeat_token[0] != '\0' &&
                            fuzz_has_bearer(eol + 1, hlen, a->heartbeat_token)));
            FUZZ_CHECK(v->beat <= LB_ADMIN_BEAT_FAIL);
            FUZZ_CHECK(strnlen(v->note, sizeof(v->note)) < sizeof(v->note));
        } else if (tlen > 0) {
            FUZZ_CHECK(fuzz_has_bearer(eol + 1, hlen, a->token));
        }
        if (v->route != LB_ADMIN_ROUTE_RELOAD) {
            FUZZ_CHECK(strncmp(sp1 + 1, "/pools/", 7) == 0);
            fuzz_check_name(v->pool, sp1 + 1, (size_t)(sp2 - sp1 - 1));
        }
        if (v->route != LB_ADMIN_ROUTE_RELOAD && v->route != LB_ADMIN_ROUTE_SERVER_ADD)
            fuzz_check_name(v->server, sp1 + 1, (size_t)(sp2 - sp1 - 1));
        if (v->route == LB_ADMIN_ROUTE_ACTION) {
            FUZZ_CHECK(v->action <= LB_ADMIN_ACTION_DISABLE);
            FUZZ_CHECK(fuzz_path_ends(sp1 + 1, sp2, fuzz_actions[v->action]));
        }
        /* the path's last segment names the write */
        FUZZ_CHECK(v->route != LB_ADMIN_ROUTE_SERVER_ADD || fuzz_path_ends(sp1 + 1, sp2, "/servers"));
        FUZZ_CHECK(v->route != LB_ADMIN_ROUTE_SERVER_WEIGHT || fuzz_path_ends(sp1 + 1, sp2, "/weight"));
        FUZZ_CHECK(v->route != LB_ADMIN_ROUTE_HEARTBEAT ||
                   fuzz_path_ends(sp1 + 1, sp2, "/heartbeat"));
        break;
    case LB_ADMIN_ROUTE_POOL:
    case LB_ADMIN_ROUTE_SERVER:
        /* reads of one pool or server: GET or HEAD, no token asked */
        FUZZ_CHECK((sp1 - raw == 3 && memcmp(raw, "GET", 3) == 0) ||
                   (sp1 - raw == 4 && memcmp(raw, "HEAD", 4) == 0));
        FUZZ_CHECK(strncmp(sp1 + 1, "/pools/", 7) == 0);
        fuzz_check_name(v->pool, sp1 + 1, (size_t)(sp2 - sp1 - 1));
        if (v->route == LB_ADMIN_ROUTE_SERVER)
            fuzz_check_name(v->server, sp1 + 1, (size_t)(sp2 - sp1 - 1));
        else
            FUZZ_CHECK(v->server[0] == '\0');
        break;
    default:
        FUZZ_CHECK(v->route >= LB_ADMIN_ROUTE_DASHBOARD && v->route <= LB_ADMIN_ROUTE_READY);
        FUZZ_CHECK(v->pool[0] == '\0' && v->server[0] == '\0');
        FUZZ_CHECK((sp1 - raw == 3 && memcmp(raw, "GET", 3) == 0) ||
                   (sp1 - raw == 4 && memcmp(raw, "HEAD", 4) == 0));
        FUZZ_CHECK(v->is_head == (raw[0] == 'H'));
        break;
    }
}

/* A 405's Allow: "M, M, ...", methods, HEAD right after GET, not the
 * method sent (raw[0..mlen)); its error says to use the first. */
static void
fuzz_check_allow(const struct lb_admin_verdict *v, const char *raw, size_t mlen)
{
    char use[64];
    size_t first = strcspn(v->allow, ",");

    fuzz_check_literal(v->allow);
    for (const char *m = v->allow; *m != '\0';) {
        size_t n = strcspn(m, ",");

        FUZZ_CHECK(n > 0);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(m[i] >= 'A' && m[i] <= 'Z');
        FUZZ_CHECK(!(n == mlen && memcmp(m, raw, n) == 0));
        if (n == 3 && memcmp(m, "GET", 3) == 0)
            FUZZ_CHECK(strncmp(m + n, ", HEAD", 6) == 0);
        m += n;
        if (*m != '\0') {
            FUZZ_CHECK(m[1] == ' ');
            m += 2;
        }
    }
    snprintf(use, sizeof(use), "method not allowed: use %.*s", (int)first, v->allow);
    FUZZ_CHECK(strcmp(v->error, use) == 0);
}

static void
fuzz_check_refusal(const struct lb_admin_verdict *v, const char *raw, size_t len)
{
    const char *sp = memchr(raw, ' ', len);

    FUZZ_CHECK(v->status == 400 || v->status == 401 || v->status == 403 ||
               v->status == 404 || v->status == 405);
    fuzz_check_literal(v->reason);
    fuzz_check_literal(v->error);
    FUZZ_CHECK(!v->must_close || v->status == 400);
    FUZZ_CHECK((v->allow != NULL) == (v->status == 405));
    if (v->allow != NULL) {
        FUZZ_CHECK(sp != NULL);
        fuzz_check_allow(v, raw, (size_t)(sp - raw));
    }
    FUZZ_CHECK(v->is_auth_challenge == (v->status == 401));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct lb_admin_verdict v, again;
    struct conf_admin a;
    const char *raw;
    size_t len;

    if (size == 0)
        return 0;
    fuzz_port_admin(&fuzz_ports[data[0] % (sizeof(fuzz_ports) / sizeof(fuzz_ports[0]))], &a);
    raw = (const char *)data + 1;
    len = size - 1;
    memset(&v, 0xa5, sizeof(v));            /* every field must be set */
    lb_admin_request_check(&a, raw, len, &v);
    memset(&again, 0x5a, sizeof(again));
    lb_admin_request_check(&a, raw, len, &again);
    FUZZ_CHECK(v.route == again.route && v.status == again.status &&
               v.must_close == again.must_close && v.is_head == again.is_head);
    FUZZ_CHECK(v.route < LB_ADMIN_ROUTE_COUNT);
    if (v.route == LB_ADMIN_ROUTE_REFUSED) {
        fuzz_check_refusal(&v, raw, len);
        FUZZ_CHECK(strcmp(v.error, again.error) == 0);
    } else {
        FUZZ_CHECK(!v.must_close && v.allow == NULL && !v.is_auth_challenge);
        fuzz_check_route(&a, raw, len, &v);
        if (v.route == LB_ADMIN_ROUTE_ACTION)
            FUZZ_CHECK(strcmp(v.pool, again.pool) == 0 && strcmp(v.server, again.server) == 0 &&
                       v.action == again.action);
    }
    return 0;
}
