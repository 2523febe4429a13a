/*
 * admin_request.c - the admin port's decision about one request, from the
 * bytes the client sent (see admin_request.h): a strict HTTP/1.1 head
 * parser, the Host and Origin checks, the routes and the token.
 *
 * Why parse again what evhttp parsed: a request smuggled past a proxy, a
 * token check fooled by trailing bytes and a version answered as
 * "HTTP/1.-1" all come from the places where libevent 2.1 reads a request
 * differently from the standard. Here every such place is refused, so
 * what is accepted means the same thing to both parsers.
 *
 * Host and Origin (issue 10: any web page could POST to the admin port,
 * and a page that rebinds its DNS name to 127.0.0.1 could read /stats):
 *   - a browser always sends Host as the name in the page's URL, so a
 *     Host that is not a name of this port is a rebound name: refused;
 *   - a browser sends Origin with every POST and every cross-origin
 *     fetch; a request from one of our own pages carries "http://" + the
 *     very Host it was sent to. Anything else is another site: refused.
 *     Tools (curl, Prometheus) send no Origin and are not affected.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "admin_request.h"

/* A piece of the raw request (not NUL-terminated). */
struct lb_admin_span {
    const char *p;
    size_t len;
};

/* The parts of one request the decision needs, pointing into its bytes. */
struct lb_admin_head {
    struct lb_admin_span method, target;
    bool is_http11;
    struct lb_admin_span host, origin;
    struct lb_admin_span host_name;         /* host without its port */
    struct lb_admin_span authorization;     /* leading blanks skipped, the
                                               rest exactly as sent */
    bool has_host, has_origin, has_authorization, has_content_length;
    uint64_t content_length;
    size_t head_len;                        /* up to the empty line, included */
    struct lb_admin_span body;
};

static const char *lb_admin_parse(const char *raw, size_t len, struct lb_admin_head *h);
static void lb_admin_route(const struct conf_admin *admin, const struct lb_admin_head *h,
                           struct lb_admin_verdict *v);

/* Header names and host names: any case. */
static bool
lb_admin_span_is(struct lb_admin_span s, const char *text)
{
    return s.len == strlen(text) && strncasecmp(s.p, text, s.len) == 0;
}

/* Methods (RFC 9110 9.1) and paths: exactly. */
static bool
lb_admin_span_eq(struct lb_admin_span s, const char *text)
{
    return s.len == strlen(text) && memcmp(s.p, text, s.len) == 0;
}

static void
lb_admin_refuse(struct lb_admin_verdict *v, int status, const char *error)
{
    static const struct { int status; const char *reason; } reasons[] = {
        { 400, "Bad Request" }, { 401, "Unauthorized" }, { 403, "Forbidden" },
        { 404, "Not Found" }, { 405, "Method Not Allowed" },
    };

    v->route = LB_ADMIN_ROUTE_REFUSED;
    v->status = status;
    v->error = error;
    v->reason = "Error";
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        if (reasons[i].status == status)
            v->reason = reasons[i].reason;
    }
}

void
lb_admin_request_check(const struct conf_admin *admin, const char *raw, size_t len,
                       struct lb_admin_verdict *v)
{
    struct lb_admin_head h;
    const char *bad;

    memset(v, 0, sizeof(*v));
    bad = lb_admin_parse(raw, len, &h);
    if (bad != NULL) {
        /* What follows a request we cannot frame for sure may be another
         * request smuggled in its body: answer and close. */
        lb_admin_refuse(v, 400, bad);
        v->must_close = true;
        return;
    }
    v->is_head = lb_admin_span_eq(h.method, "HEAD");
    lb_admin_route(admin, &h, v);
}

/* ------------------------------------------------------------- parsing */

/* RFC 9110 5.6.2: the characters of a method or a header name. */
static bool
lb_admin_is_tchar(unsigned char c)
{
    return isalnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The next line of raw[*pos..len) without its end, LF or CRLF (evhttp
 * takes both). false when no line end is left. */
static bool
lb_admin_next_line(const char *raw, size_t len, size_t *pos, struct lb_admin_span *line)
{
    const char *nl = memchr(raw + *pos, '\n', len - *pos);

    if (nl == NULL)
        return false;
    line->p = raw + *pos;
    line->len = (size_t)(nl - line->p);
    if (line->len > 0 && line->p[line->len - 1] == '\r')
        line->len--;
    *pos = (size_t)(nl - raw) + 1;
    return true;
}

/* method SP request-target SP HTTP-version, with single spaces. */
static const char *
lb_admin_parse_request_line(struct lb_admin_span line, struct lb_admin_head *h)
{
    size_t i = 0, start;

    while (i < line.len && lb_admin_is_tchar((unsigned char)line.p[i]))
        i++;
    if (i == 0 || i == line.len || line.p[i] != ' ')
        return "bad request line";
    h->method = (struct lb_admin_span){ line.p, i };
    start = ++i;
    while (i < line.len && (unsigned char)line.p[i] > ' ' && (unsigned char)line.p[i] < 0x7f)
        i++;
    if (i == start || i == line.len || line.p[i] != ' ')
        return "bad request line";
    h->target = (struct lb_admin_span){ line.p + start, i - start };
    i++;
    if (memchr(line.p + i, ' ', line.len - i) != NULL)
        return "bad request line";          /* a space in the target */
    /* Exactly these two: libevent reads any HTTP/1.N, keeps N in a char
     * and answers "HTTP/1.-1" to HTTP/1.2147483647. */
    if (line.len - i == 8 && memcmp(line.p + i, "HTTP/1.1", 8) == 0)
        h->is_http11 = true;
    else if (!(line.len - i == 8 && memcmp(line.p + i, "HTTP/1.0", 8) == 0))
        return "unsupported HTTP version: use HTTP/1.1 or HTTP/1.0";
    return NULL;
}

static const char *
lb_admin_parse_content_length(struct lb_admin_span value, struct lb_admin_head *h)
{
    uint64_t n = 0;

    /* Digits only: libevent's strtoll would take "+5" and " 5". */
    if (value.len == 0 || value.len > 19)
        return "bad Content-Length";
    for (size_t i = 0; i < value.len; i++) {
        if (value.p[i] < '0' || value.p[i] > '9')
            return "bad Content-Length";
        n = n * 10 + (uint64_t)(value.p[i] - '0');
    }
    h->content_length = n;
    return NULL;
}

/* A header the decision reads: given once at most. */
static const char *
lb_admin_take_once(bool *seen, struct lb_admin_span *dst, struct lb_admin_span value,
                   const char *twice)
{
    if (*seen)
        return twice;
    *seen = true;
    *dst = value;
    return NULL;
}

/* name ":" OWS value OWS (RFC 9112 5). */
static const char *
lb_admin_parse_header(struct lb_admin_span line, struct lb_admin_head *h)
{
    struct lb_admin_span name, value, raw_value;
    size_t i = 0;

    /* A folded line (obs-fold) continues the previous value for libevent;
     * RFC 9112 5.2 lets a server refuse it, and a strict one must. */
    if (line.p[0] == ' ' || line.p[0] == '\t')
        return "folded header line";
    while (i < line.len && lb_admin_is_tchar((unsigned char)line.p[i]))
        i++;
    if (i == 0 || i == line.len || line.p[i] != ':')
        return "bad header line";
    name = (struct lb_admin_span){ line.p, i };
    for (size_t k = i + 1; k < line.len; k++) {
        unsigned char c = (unsigned char)line.p[k];

        /* libevent would end the value at a NUL and keep going. */
        if ((c < ' ' && c != '\t') || c == 0x7f)
            return "control character in a header";
    }
    i++;
    while (i < line.len && (line.p[i] == ' ' || line.p[i] == '\t'))
        i++;
    raw_value = (struct lb_admin_span){ line.p + i, line.len - i };
    value = raw_value;
    while (value.len > 0 && (value.p[value.len - 1] == ' ' || value.p[value.len - 1] == '\t'))
        value.len--;

    if (lb_admin_span_is(name, "Host"))
        return lb_admin_take_once(&h->has_host, &h->host, value, "two Host headers");
    if (lb_admin_span_is(name, "Origin"))
        return lb_admin_take_once(&h->has_origin, &h->origin, value, "two Origin headers");
    if (lb_admin_span_is(name, "Authorization"))
        return lb_admin_take_once(&h->has_authorization, &h->authorization, raw_value,
                                  "two Authorization headers");
    if (lb_admin_span_is(name, "Content-Length")) {
        struct lb_admin_span unused;
        const char *bad = lb_admin_take_once(&h->has_content_length, &unused, value,
                                             "two Content-Length headers");
        return bad != NULL ? bad : lb_admin_parse_content_length(value, h);
    }
    if (lb_admin_span_is(name, "Transfer-Encoding"))
        return "Transfer-Encoding is not supported: send Content-Length";
    return NULL;
}

/* uri-host [":" port] (RFC 9110 7.2): a bracketed IPv6 address, or
 * letters, digits and . - _ ~ (names and IPv4). */
static bool
lb_admin_host_is_valid(struct lb_admin_span host, struct lb_admin_span *name)
{
    size_t i = 0;

    if (host.len > 0 && host.p[0] == '[') {
        const char *rb = memchr(host.p, ']', host.len);

        if (rb == NULL)
            return false;
        i = (size_t)(rb - host.p) + 1;
        for (size_t k = 1; k + 1 < i; k++) {
            if (!isxdigit((unsigned char)host.p[k]) && host.p[k] != ':' && host.p[k] != '.')
                return false;
        }
    } else {
        while (i < host.len && (isalnum((unsigned char)host.p[i]) ||
                                strchr(".-_~", host.p[i]) != NULL))
            i++;
    }
    if (i == 0 || i > CONF_HOST_MAX)
        return false;
    *name = (struct lb_admin_span){ host.p, i };
    if (i == host.len)
        return true;
    if (host.p[i] != ':' || host.len - i < 2 || host.len - i > 6)
        return false;
    for (size_t k = i + 1; k < host.len; k++) {
        if (!isdigit((unsigned char)host.p[k]))
            return false;
    }
    return true;
}

/* Returns NULL, or what is wrong with the request (the 400's message). */
static const char *
lb_admin_parse(const char *raw, size_t len, struct lb_admin_head *h)
{
    struct lb_admin_span line;
    size_t pos = 0;
    const char *bad;

    memset(h, 0, sizeof(*h));
    if (!lb_admin_next_line(raw, len, &pos, &line))
        return "bad request line";
    if ((bad = lb_admin_parse_request_line(line, h)) != NULL)
        return bad;
    for (;;) {
        if (!lb_admin_next_line(raw, len, &pos, &line))
            return "request head does not end";
        if (line.len == 0)
            break;
        if ((bad = lb_admin_parse_header(line, h)) != NULL)
            return bad;
    }
    h->head_len = pos;
    h->body = (struct lb_admin_span){ raw + pos, len - pos };
    /* evhttp read exactly these bytes as this request: if its idea of the
     * body's end is not Content-Length's, the two parsers disagree. */
    if ((uint64_t)(len - pos) != (h->has_content_length ? h->content_length : 0))
        return "the body does not match Content-Length";
    if (lb_admin_span_eq(h->method, "CONNECT"))
        return "CONNECT is not supported";
    if (h->target.p[0] != '/')
        return "bad request target: use a path such as /stats";
    if (h->is_http11 && !h->has_host)
        return "missing Host header";
    if (h->has_host && !lb_admin_host_is_valid(h->host, &h->host_name))
        return "bad Host header";
    return NULL;
}

/* ------------------------------------------------------- host and origin */

/* The host part of a listen address as written: "127.0.0.1" of
 * "127.0.0.1:9900", "[::1]" of "[::1]:9900". */
static struct lb_admin_span
lb_admin_listen_host(const struct conf_addr *listen)
{
    const char *colon = strrchr(listen->text, ':');

    return (struct lb_admin_span){ listen->text,
                                   colon != NULL ? (size_t)(colon - listen->text) : 0 };
}

/* An IP literal names this port when it is the listen address, or any
 * address of its family when the port listens on the wildcard: it was
 * reached at that address, and an address cannot be rebound as a name can. */
static bool
lb_admin_ip_is_listen(const struct conf_addr *listen, struct lb_admin_span name)
{
    char text[INET6_ADDRSTRLEN + 2];
    unsigned char addr[sizeof(struct in6_addr)];
    bool is_v6 = name.len >= 2 && name.p[0] == '[';
    size_t n = name.len - (is_v6 ? 2 : 0);

    if (n >= sizeof(text))
        return false;
    memcpy(text, name.p + is_v6, n);
    text[n] = '\0';
    if (is_v6 && listen->ss.ss_family == AF_INET6 &&
        inet_pton(AF_INET6, text, addr) == 1) {
        const struct in6_addr *l = &((const struct sockaddr_in6 *)&listen->ss)->sin6_addr;
        return memcmp(l, addr, 16) == 0 || IN6_IS_ADDR_UNSPECIFIED(l);
    }
    if (!is_v6 && listen->ss.ss_family == AF_INET &&
        inet_pton(AF_INET, text, addr) == 1) {
        const struct in_addr *l = &((const struct sockaddr_in *)&listen->ss)->sin_addr;
        return memcmp(l, addr, 4) == 0 || l->s_addr == htonl(INADDR_ANY);
    }
    return false;
}

static bool
lb_admin_host_is_ours(const struct conf_admin *admin, struct lb_admin_span name)
{
    struct lb_admin_span listen = lb_admin_listen_host(&admin->listen);

    if (lb_admin_span_is(name, "localhost"))
        return true;
    if (listen.len == name.len && strncasecmp(listen.p, name.p, name.len) == 0)
        return true;
    for (size_t i = 0; i < admin->allowed_hosts.n; i++) {
        if (lb_admin_span_is(name, admin->allowed_hosts.names[i]))
            return true;
    }
    return lb_admin_ip_is_listen(&admin->listen, name);
}

/* Our own page's origin is "http://" + the Host it was sent to (the Host
 * having been checked): the port may be reached through a tunnel or a
 * mapped port, and the browser writes both from the same URL. */
static bool
lb_admin_origin_is_ours(const struct lb_admin_head *h)
{
    static const char scheme[] = "http://";
    size_t n = sizeof(scheme) - 1;

    return h->has_host && h->origin.len == n + h->host.len &&
           strncasecmp(h->origin.p, scheme, n) == 0 &&
           strncasecmp(h->origin.p + n, h->host.p, h->host.len) == 0;
}

/* ------------------------------------------------------------- routing */

/* Constant time over the token's length: how long the comparison takes
 * tells nothing about how many leading bytes matched, nor about the
 * length presented. */
static bool
lb_admin_token_equal(const char *a, size_t alen, const char *token, size_t tlen)
{
    volatile unsigned char diff = alen != tlen;

    for (size_t i = 0; i < tlen; i++)
        diff |= (unsigned char)(token[i] ^ (i < alen ? a[i] : 0));
    return diff == 0;
}

/* "Bearer" (any case, RFC 9110 11.1), spaces, then the token and nothing
 * else: not a trailing space, not a NUL and junk (refused when parsed). */
static bool
lb_admin_is_authorized(const char *token, const struct lb_admin_head *h)
{
    struct lb_admin_span a = h->authorization;
    size_t tlen = strlen(token);

    if (tlen == 0)
        return true;
    if (!h->has_authorization || a.len < 7 || strncasecmp(a.p, "Bearer ", 7) != 0)
        return false;
    a.p += 7;
    a.len -= 7;
    while (a.len > 0 && a.p[0] == ' ') {
        a.p++;
        a.len--;
    }
    return lb_admin_token_equal(a.p, a.len, token, tlen);
}

/* A heartbeat comes from the instance itself, which may hold only the
 * heartbeat_token; the operator's token works too. */
static bool
lb_admin_beat_is_authorized(const struct conf_admin *admin, const struct lb_admin_head *h)
{
    const char *hb = admin->heartbeat_token != NULL ? admin->heartbeat_token : "";

    if (admin->token[0] == '\0' && hb[0] == '\0')
        return true;
    return (admin->token[0] != '\0' && lb_admin_is_authorized(admin->token, h)) ||
           (hb[0] != '\0' && lb_admin_is_authorized(hb, h));
}

/* Copies a path segment into a name buffer; one longer than any name
 * leaves it empty, which matches no pool or server (a 404, as for any
 * other unknown name). */
static void
lb_admin_copy_name(char *dst, struct lb_admin_span s)
{
    size_t n = s.len <= CONF_NAME_MAX ? s.len : 0;

    memcpy(dst, s.p, n);
    dst[n] = '\0';
}

/* ------------------------------------------------------- JSON bodies */

/* A field of a body: a string (at most cap - 1 bytes, no \u escape but
 * \u0000-free ASCII ones) or a count (0..max). */
struct lb_admin_field {
    const char *name;
    bool is_count;
    bool is_required;
    char *str;
    size_t cap;
    uint32_t *count;
    uint32_t max;
    bool is_seen;
};

static const char *
lb_admin_json_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

/* A JSON string at *p into out (cap bytes); NULL on success, else why. */
static const char *
lb_admin_json_string(const char **p, const char *end, char *out, size_t cap)
{
    size_t n = 0;
    const char *q = *p;

    if (q >= end || *q != '"')
        return "expected a string";
    for (q++; q < end && *q != '"'; q++) {
        char c = *q;

        if ((unsigned char)c < 0x20)
            return "a control character in a string";
        if (c == '\\') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *k;

            if (++q >= end || (k = strchr(from, *q)) == NULL || *q == '\0')
                return "an unsupported escape in a string";
            c = to[k - from];
        }
        if (n + 1 >= cap)
            return "a string too long";
        out[n++] = c;
    }
    if (q >= end)
        return "a string does not end";
    out[n] = '\0';
    *p = q + 1;
    return NULL;
}

/* {"field": value, ...} with exactly the fields given (each once). NULL,
 * or why not. */
static const char *
lb_admin_json_object(struct lb_admin_span body, struct lb_admin_field *fields, size_t n)
{
    const char *p = body.p, *end = body.p + body.len;
    char key[32];

    p = lb_admin_json_ws(p, end);
    if (p >= end || *p++ != '{')
        return "the body is not a JSON object";
    p = lb_admin_json_ws(p, end);
    if (p < end && *p == '}')
        p++;
    else {
        for (;;) {
            struct lb_admin_field *f = NULL;
            const char *bad;

            p = lb_admin_json_ws(p, end);
            if ((bad = lb_admin_json_string(&p, end, key, sizeof(key))) != NULL)
                return "the body is not a JSON object of known fields";
            for (size_t i = 0; i < n && f == NULL; i++)
                f = strcmp(fields[i].name, key) == 0 ? &fields[i] : NULL;
            if (f == NULL)
                return "unknown field in the body";
            if (f->is_seen)
                return "a field is given twice in the body";
            f->is_seen = true;
            p = lb_admin_json_ws(p, end);
            if (p >= end || *p++ != ':')
                return "the body is not valid JSON";
            p = lb_admin_json_ws(p, end);
            if (f->is_count) {
                uint64_t v = 0;
                const char *d = p;

                while (p < end && *p >= '0' && *p <= '9' && p - d < 10)
                    v = v * 10 + (uint64_t)(*p++ - '0');
                if (p == d || (p < end && *p >= '0' && *p <= '9'))
                    return "a count field is not a number";
                if (v > f->max)
                    return "a count field is out of range";
                *f->count = (uint32_t)v;
            } else if ((bad = lb_admin_json_string(&p, end, f->str, f->cap)) != NULL) {
                return bad;
            }
            p = lb_admin_json_ws(p, end);
            if (p < end && *p == ',') {
                p++;
                continue;
            }
            if (p < end && *p == '}') {
                p++;
                break;
            }
            return "the body is not valid JSON";
        }
    }
    if (lb_admin_json_ws(p, end) != end)
        return "more than one JSON object in the body";
    for (size_t i = 0; i < n; i++) {
        if (fields[i].is_required && !fields[i].is_seen)
            return fields[i].is_count ? "the body has no weight" : "the body lacks a field";
    }
    return NULL;
}

/* POST /pools/P/servers: {"name","address"[,"weight"][,"max_connections"]}
 * becomes the value of a server line. */
static void
lb_admin_body_server(struct lb_admin_span body, struct lb_admin_verdict *v)
{
    char name[128], address[sizeof(((struct conf_addr *)0)->text)];
    uint32_t weight = 1, maxconn = 0;
    struct lb_admin_field fields[] = {
        { .name = "name", .is_required = true, .str = name, .cap = sizeof(name) },
        { .name = "address", .is_required = true, .str = address, .cap = sizeof(address) },
        { .name = "weight", .is_count = true, .count = &weight, .max = UINT32_MAX },
        { .name = "max_connections", .is_count = true, .count = &maxconn, .max = UINT32_MAX },
    };
    const char *bad = lb_admin_json_object(body, fields, 4);
    size_t n;

    if (bad == NULL && (strpbrk(name, " \t") != NULL || strpbrk(address, " \t") != NULL))
        bad = "name and address have no spaces";
    if (bad != NULL) {
        lb_admin_refuse(v, 400, strcmp(bad, "the body lacks a field") == 0
                                    ? "the body needs a name and an address"
                                    : bad);
        return;
    }
    /* the options the body gave, as the line would give them */
    n = (size_t)snprintf(v->server_line, sizeof(v->server_line), "%s %s", name, address);
    if (fields[2].is_seen && n < sizeof(v->server_line))
        n += (size_t)snprintf(v->server_line + n, sizeof(v->server_line) - n, " weight=%u",
                              weight);
    if (fields[3].is_seen && n < sizeof(v->server_line))
        snprintf(v->server_line + n, sizeof(v->server_line) - n, " max_connections=%u", maxconn);
}

static void
lb_admin_body_weight(struct lb_admin_span body, struct lb_admin_verdict *v)
{
    struct lb_admin_field fields[] = {
        { .name = "weight", .is_count = true, .is_required = true, .count = &v->weight,
          .max = UINT32_MAX },
    };
    const char *bad = lb_admin_json_object(body, fields, 1);

    if (bad != NULL)
        lb_admin_refuse(v, 400, bad);
}

/* POST .../heartbeat: an empty body is a pass; else {"status"[,"note"]}
 * or {"note"}. */
static void
lb_admin_body_heartbeat(struct lb_admin_span body, struct lb_admin_verdict *v)
{
    static const char *const names[] = { "pass", "warn", "fail" };
    char status[8] = "pass";
    struct lb_admin_field fields[] = {
        { .name = "status", .str = status, .cap = sizeof(status) },
        { .name = "note", .str = v->note, .cap = sizeof(v->note) },
    };
    const char *bad;

    v->beat = LB_ADMIN_BEAT_PASS;
    v->note[0] = '\0';
    if (lb_admin_json_ws(body.p, body.p + body.len) == body.p + body.len)
        return;
    if ((bad = lb_admin_json_object(body, fields, 2)) != NULL) {
        lb_admin_refuse(v, 400, strcmp(bad, "a string too long") == 0
                                    ? "a string too long (a note has at most 127 bytes)"
                                    : bad);
        return;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(status, names[i]) == 0) {
            v->beat = (enum lb_admin_beat)i;
            return;
        }
    }
    lb_admin_refuse(v, 400, "status: use pass, warn or fail");
}

/* ------------------------------------------------------------- routes */

/* The segments of "/pools/P[/servers[/S[/ACTION]]]": their count (2 to
 * 5), or 0 when the path has another shape. */
static size_t
lb_admin_parse_pools_path(struct lb_admin_span path, struct lb_admin_verdict *v,
                          struct lb_admin_span *action)
{
    struct lb_admin_span seg[5];
    size_t n = 0, i = 1, start = 1;

    if (path.len < 2 || path.p[path.len - 1] == '/')
        return 0;
    for (; i <= path.len; i++) {
        if (i < path.len && path.p[i] != '/')
            continue;
        if (i == start || n == 5)
            return 0;                   /* an empty segment, or a sixth */
        seg[n++] = (struct lb_admin_span){ path.p + start, i - start };
        start = i + 1;
    }
    if (n < 2 || !lb_admin_span_eq(seg[0], "pools") ||
        (n >= 3 && !lb_admin_span_eq(seg[2], "servers")))
        return 0;
    lb_admin_copy_name(v->pool, seg[1]);
    if (n >= 4)
        lb_admin_copy_name(v->server, seg[3]);
    if (n == 5)
        *action = seg[4];
    return n;
}

/* Routes a /pools/... path; sets *method to the one it takes. A GET of a
 * pool or a server is a read, as GET /stats is. */
static void
lb_admin_route_pools(struct lb_admin_span path, bool is_get, struct lb_admin_verdict *v,
                     const char **method)
{
    static const struct { const char *name; enum lb_admin_action action; } actions[] = {
        { "enable", LB_ADMIN_ACTION_ENABLE },
        { "drain", LB_ADMIN_ACTION_DRAIN },
        { "disable", LB_ADMIN_ACTION_DISABLE },
    };
    struct lb_admin_span action;
    size_t n = lb_admin_parse_pools_path(path, v, &action);

    *method = "POST";
    if (is_get && (n == 2 || n == 3 || n == 4)) {
        v->route = n == 4 ? LB_ADMIN_ROUTE_SERVER : LB_ADMIN_ROUTE_POOL;
        *method = "GET";
        return;
    }
    if (n == 3) {
        v->route = LB_ADMIN_ROUTE_SERVER_ADD;
        return;
    }
    if (n == 4) {
        v->route = LB_ADMIN_ROUTE_SERVER_DELETE;
        *method = "DELETE";
        return;
    }
    if (n != 5) {
        lb_admin_refuse(v, 400, "bad path: use /pools/POOL[/servers[/SERVER[/ACTION]]]");
        return;
    }
    if (lb_admin_span_eq(action, "weight")) {
        v->route = LB_ADMIN_ROUTE_SERVER_WEIGHT;
        return;
    }
    if (lb_admin_span_eq(action, "heartbeat")) {
        v->route = LB_ADMIN_ROUTE_HEARTBEAT;
        return;
    }
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
        if (lb_admin_span_eq(action, actions[i].name)) {
            v->route = LB_ADMIN_ROUTE_ACTION;
            v->action = actions[i].action;
            return;
        }
    }
    lb_admin_refuse(v, 400, "bad action: use disable, drain, enable, weight or heartbeat");
}

static void
lb_admin_route(const struct conf_admin *admin, const struct lb_admin_head *h,
               struct lb_admin_verdict *v)
{
    static const struct { const char *path; enum lb_admin_route route; } gets[] = {
        { "/", LB_ADMIN_ROUTE_DASHBOARD }, { "/stats", LB_ADMIN_ROUTE_STATS },
        { "/metrics", LB_ADMIN_ROUTE_METRICS }, { "/healthz", LB_ADMIN_ROUTE_HEALTHZ },
        { "/ready", LB_ADMIN_ROUTE_READY },
    };
    struct lb_admin_span path = h->target;
    const char *query = memchr(path.p, '?', path.len);
    const char *method = "POST";        /* the one a write route takes */
    bool is_get = lb_admin_span_eq(h->method, "GET") || v->is_head;

    if (h->has_host && !lb_admin_host_is_ours(admin, h->host_name)) {
        lb_admin_refuse(v, 403, "forbidden: Host is not this admin port (see [admin] allowed_hosts)");
        return;
    }
    if (h->has_origin && !lb_admin_origin_is_ours(h)) {
        lb_admin_refuse(v, 403, "forbidden: a request from another site (Origin)");
        return;
    }
    if (query != NULL)
        path.len = (size_t)(query - path.p);
    for (size_t i = 0; i < sizeof(gets) / sizeof(gets[0]); i++) {
        if (lb_admin_span_eq(path, gets[i].path)) {
            v->route = gets[i].route;
            if (!is_get) {
                lb_admin_refuse(v, 405, "method not allowed: use GET");
                v->allow = "GET, HEAD";
            }
            return;
        }
    }
    if (lb_admin_span_eq(path, "/reload"))
        v->route = LB_ADMIN_ROUTE_RELOAD;
    else if (lb_admin_span_eq(path, "/pools") ||
             (path.len > 6 && memcmp(path.p, "/pools/", 7) == 0))
        lb_admin_route_pools(path, is_get, v, &method);
    else
        lb_admin_refuse(v, 404, "not found");
    if (v->route == LB_ADMIN_ROUTE_REFUSED || v->route == LB_ADMIN_ROUTE_POOL ||
        v->route == LB_ADMIN_ROUTE_SERVER)
        return;
    if (!lb_admin_span_eq(h->method, method)) {
        lb_admin_refuse(v, 405, strcmp(method, "DELETE") == 0 ? "method not allowed: use DELETE"
                                                                : "method not allowed: use POST");
        v->allow = method;
    } else if (v->route == LB_ADMIN_ROUTE_HEARTBEAT ? !lb_admin_beat_is_authorized(admin, h)
                                                    : !lb_admin_is_authorized(admin->token, h)) {
        lb_admin_refuse(v, 401, "unauthorized: send Authorization: Bearer <token>");
        v->is_auth_challenge = true;
    } else if (v->route == LB_ADMIN_ROUTE_HEARTBEAT) {
        lb_admin_body_heartbeat(h->body, v);
    } else if (v->route == LB_ADMIN_ROUTE_SERVER_ADD) {
        lb_admin_body_server(h->body, v);
    } else if (v->route == LB_ADMIN_ROUTE_SERVER_WEIGHT) {
        lb_admin_body_weight(h->body, v);
    }
}

/* ----------------------------------------------------- evhttp's own pages */

size_t
lb_admin_error_page_json(const char *in, size_t len, char *out, size_t outlen)
{
    static const char page_end[] = "</BODY></HTML>\n";
    static const char page_mark[] = "\r\n\r\n<HTML><HEAD>\n<TITLE>";
    const char *eol;
    char body[96];
    int code, n, m;

    /* libevent writes the whole page into the output buffer before it
     * sends anything: the status line, headers, and this exact HTML. */
    if (len < 40 || len > 4096 ||
        memcmp(in + len - (sizeof(page_end) - 1), page_end, sizeof(page_end) - 1) != 0 ||
        memmem(in, len, page_mark, sizeof(page_mark) - 1) == NULL ||
        memcmp(in, "HTTP/1.", 7) != 0 || in[8] != ' ' ||
        !isdigit((unsigned char)in[9]) || !isdigit((unsigned char)in[10]) ||
        !isdigit((unsigned char)in[11]))
        return 0;
    code = (in[9] - '0') * 100 + (in[10] - '0') * 10 + (in[11] - '0');
    /* The status line, printable and ended by CRLF: a page without one is
     * not libevent's (found by fuzzing: a NUL in it cut the copy short). */
    eol = memchr(in, '\r', len);
    if (code < 400 || eol == NULL || eol - in > 64 || eol[1] != '\n')
        return 0;
    for (const char *p = in; p < eol; p++) {
        if (*p < ' ' || *p > '~')
            return 0;
    }
    n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n",
                 code == 413 ? "request body too large" :
                 code == 501 ? "method not implemented" : "bad request");
    m = snprintf(out, outlen, "%.*s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                 "Content-Length: %d\r\n\r\n%s", (int)(eol - in), in, n, body);
    return m > 0 && (size_t)m < outlen ? (size_t)m : 0;
}
