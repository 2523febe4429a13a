/*
 * admin_request.c - the admin port's decision about one request, from the
 * bytes the client sent (see admin_request.h): a strict HTTP/1.1 head
 * parser, the Host and Origin checks, the routes and the token.
 *
 * Why parse again what evhttp parsed: a request smuggled past a proxy, a
 * token check fooled by trailing bytes and a version answered as
 * "HTTP/1.-1" all come from the places where libevent 2.1 reads a request
 * differently from the standard. Here every such place is refused, so
 * what is accepted means the same thing to both parsers. JSON bodies are
 * read by jansson, as etcd's answers are, into the fields each route
 * takes, and refused in the port's own words.
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

#include <jansson.h>

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

/* Who may call a route. */
enum lb_admin_auth {
    LB_ADMIN_AUTH_NONE = 0,             /* a read: whoever Host and Origin let in */
    LB_ADMIN_AUTH_TOKEN,                /* Bearer [admin] token, when one is set */
    LB_ADMIN_AUTH_HEARTBEAT,            /* the token or heartbeat_token (open when
                                           neither is set): the instance itself */
};

/* Reads a route's body into *v, or refuses it (400). */
typedef void lb_admin_body_pt(struct lb_admin_span body, struct lb_admin_verdict *v);

/* One endpoint. A pattern is the path as written, {pool} and {server}
 * standing for one non-empty segment each, copied into the verdict (any
 * other {name} stands for a segment that is not kept). A GET row answers
 * HEAD too, with the headers only. */
struct lb_admin_route_row {
    const char *method;
    const char *pattern;
    enum lb_admin_auth auth;
    lb_admin_body_pt *body;             /* NULL: a body is not read */
    enum lb_admin_route route;
    enum lb_admin_action action;        /* for LB_ADMIN_ROUTE_ACTION */
};

static const char *lb_admin_parse(const char *raw, size_t len, struct lb_admin_head *h);
static void lb_admin_route(const struct conf_admin *admin, const struct lb_admin_head *h,
                           struct lb_admin_verdict *v);
static lb_admin_body_pt lb_admin_body_server, lb_admin_body_weight, lb_admin_body_heartbeat;

/*
 * The admin port's endpoints, as the README's table lists them: a new one
 * is a row here, a value of enum lb_admin_route and its handler in
 * admin.c's lb_admin_handlers[]. The 405 answers are written from these
 * rows (Allow, "use POST"), and so is the list of actions in a bad
 * action's message.
 *
 * Why the rows live here and the handlers in admin.c, joined by the route:
 * the unit test and the fuzz targets link this file alone (no libevent)
 * and must decide with the very rows lb decides with. The handlers are
 * admin.c's static functions on evhttp requests; rows that held them could
 * only be built in admin.c, and a checker handed its table from there
 * would leave the tests a table of their own, not the one lb runs.
 *
 * Order counts where several rows are listed: Allow names methods as the
 * rows come, and the bad action message names the actions as they come.
 */
static const struct lb_admin_route_row lb_admin_routes[] = {
    { .method = "GET", .pattern = "/",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_DASHBOARD },
    { .method = "GET", .pattern = "/stats",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_STATS },
    { .method = "GET", .pattern = "/metrics",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_METRICS },
    { .method = "GET", .pattern = "/healthz",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_HEALTHZ },
    { .method = "GET", .pattern = "/ready",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_READY },
    { .method = "POST", .pattern = "/reload",
      .auth = LB_ADMIN_AUTH_TOKEN, .route = LB_ADMIN_ROUTE_RELOAD },
    { .method = "GET", .pattern = "/pools/{pool}",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_POOL },
    { .method = "GET", .pattern = "/pools/{pool}/servers",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_POOL },
    { .method = "POST", .pattern = "/pools/{pool}/servers",
      .auth = LB_ADMIN_AUTH_TOKEN, .route = LB_ADMIN_ROUTE_SERVER_ADD,
      .body = lb_admin_body_server },
    { .method = "GET", .pattern = "/pools/{pool}/servers/{server}",
      .auth = LB_ADMIN_AUTH_NONE, .route = LB_ADMIN_ROUTE_SERVER },
    { .method = "DELETE", .pattern = "/pools/{pool}/servers/{server}",
      .auth = LB_ADMIN_AUTH_TOKEN, .route = LB_ADMIN_ROUTE_SERVER_DELETE },
    { .method = "POST", .pattern = "/pools/{pool}/servers/{server}/disable",
      .auth = LB_ADMIN_AUTH_TOKEN, .route = LB_ADMIN_ROUTE_ACTION,
      .action = LB_ADMIN_ACTION_DISABLE },
    { .method = "POST", .pattern = "/pools/{pool}/servers/{server}/drain",
      .auth = LB_ADMIN_AUTH_TOKEN, .route = LB_ADMIN_ROUTE_ACTION,
      .action = LB_ADMIN_ACTION_DRAIN },
    { .method = "POST", .pattern = "/pools/{pool}/servers/{server}/enable",
      .auth = LB_ADMIN_AUTH_TOKEN, .route = LB_ADMIN_ROUTE_ACTION,
      .action = LB_ADMIN_ACTION_ENABLE },
    { .method = "POST", .pattern = "/pools/{pool}/servers/{server}/weight",
      .auth = LB_ADMIN_AUTH_TOKEN, .route = LB_ADMIN_ROUTE_SERVER_WEIGHT,
      .body = lb_admin_body_weight },
    { .method = "POST", .pattern = "/pools/{pool}/servers/{server}/heartbeat",
      .auth = LB_ADMIN_AUTH_HEARTBEAT, .route = LB_ADMIN_ROUTE_HEARTBEAT,
      .body = lb_admin_body_heartbeat },
};
#define LB_ADMIN_NROUTES (sizeof(lb_admin_routes) / sizeof(lb_admin_routes[0]))

/* The API: the paths under it are named by their writes. GET and HEAD
 * read any pool or server there, but another method is judged by the
 * write rows alone: a path none of them matches is a malformed call (400,
 * with the shape to use: a script sent it), and a 405's Allow names the
 * writes (Allow: DELETE for a POST to /pools/P/servers/S, as the contract
 * had it before this table). */
static const char lb_admin_api[] = "/pools";
/* A path of this shape that no row matches names an unknown action. */
static const char lb_admin_action_pattern[] = "/pools/{pool}/servers/{server}/{action}";

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
 * other unknown name), and so does none (s.p NULL). */
static void
lb_admin_copy_name(char *dst, struct lb_admin_span s)
{
    size_t n = s.len <= CONF_NAME_MAX ? s.len : 0;

    if (n > 0)
        memcpy(dst, s.p, n);
    dst[n] = '\0';
}

/* ------------------------------------------------------- JSON bodies */

/* A field of a body: a string (at most cap - 1 bytes), a count (0..max)
 * or a flag (true, false). */
struct lb_admin_field {
    const char *name;
    bool is_count;
    bool is_bool;                       /* true or false, into *flag */
    bool *flag;
    bool is_required;
    char *str;
    size_t cap;
    uint32_t *count;
    uint32_t max;
    bool is_seen;
};

/* Whether the body is blanks only (a heartbeat's empty body). */
static bool
lb_admin_body_is_empty(struct lb_admin_span body)
{
    for (size_t i = 0; i < body.len; i++) {
        if (body.p[i] != ' ' && body.p[i] != '\t' && body.p[i] != '\r' && body.p[i] != '\n')
            return false;
    }
    return true;
}

/* Why jansson refused the body, in the admin port's words. */
static const char *
lb_admin_json_refusal(const json_error_t *e)
{
    switch (json_error_code(e)) {
    case json_error_duplicate_key:
        return "a field is given twice in the body";
    case json_error_end_of_input_expected:
        return "more than one JSON object in the body";
    case json_error_invalid_utf8:
        return "the body is not UTF-8";
    case json_error_numeric_overflow:
        return "a count field is out of range";
    default:
        break;
    }
    /* a string's own faults (jansson's texts; its codes lump them in
     * with every syntax error) */
    if (strncmp(e->text, "control character", 17) == 0 ||
        strncmp(e->text, "unexpected newline", 18) == 0)
        return "a control character in a string";
    if (strncmp(e->text, "invalid escape", 14) == 0 ||
        json_error_code(e) == json_error_null_character)
        return "an unsupported escape in a string";
    if (strstr(e->text, "'[' or '{' expected") != NULL)
        return "the body is not a JSON object";
    return "the body is not valid JSON";
}

/* One member's value into f; NULL, or why not. */
static const char *
lb_admin_json_value(struct lb_admin_field *f, const json_t *v)
{
    if (f->is_bool) {
        if (!json_is_boolean(v))
            return "a flag field is not true or false";
        *f->flag = json_is_true(v);
    } else if (f->is_count) {
        if (!json_is_integer(v))
            return "a count field is not a number";
        if (json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)f->max)
            return "a count field is out of range";
        *f->count = (uint32_t)json_integer_value(v);
    } else {
        if (!json_is_string(v))
            return "expected a string";
        /* a NUL inside is refused by the parser (no JSON_ALLOW_NUL) */
        if (json_string_length(v) >= f->cap)
            return "a string too long";
        memcpy(f->str, json_string_value(v), json_string_length(v) + 1);
    }
    return NULL;
}

/* {"field": value, ...} with exactly the fields given (each once), read by
 * jansson. NULL, or why not. */
static const char *
lb_admin_json_object(struct lb_admin_span body, struct lb_admin_field *fields, size_t n)
{
    json_error_t e;
    json_t *root = json_loadb(body.p, body.len, JSON_REJECT_DUPLICATES, &e), *v;
    const char *key, *bad = NULL;

    if (root == NULL)
        return lb_admin_json_refusal(&e);
    if (!json_is_object(root)) {
        json_decref(root);
        return "the body is not a JSON object";
    }
    json_object_foreach(root, key, v) {
        struct lb_admin_field *f = NULL;

        for (size_t i = 0; i < n && f == NULL; i++)
            f = strcmp(fields[i].name, key) == 0 ? &fields[i] : NULL;
        if (f == NULL) {
            bad = "unknown field in the body";
            break;
        }
        f->is_seen = true;
        if ((bad = lb_admin_json_value(f, v)) != NULL)
            break;
    }
    json_decref(root);
    for (size_t i = 0; bad == NULL && i < n; i++) {
        if (fields[i].is_required && !fields[i].is_seen)
            bad = fields[i].is_count ? "the body has no weight" : "the body lacks a field";
    }
    return bad;
}

/* The value of a server line, "NAME ADDRESS[ weight=N][ max_connections=N]",
 * with the options the body gave, as the line would give them. */
static void
lb_admin_server_line(struct lb_admin_verdict *v, const char *name, const char *address,
                     const struct lb_admin_field *weight, const struct lb_admin_field *maxconn)
{
    size_t n = (size_t)snprintf(v->server_line, sizeof(v->server_line), "%s %s", name, address);

    if (weight->is_seen && n < sizeof(v->server_line))
        n += (size_t)snprintf(v->server_line + n, sizeof(v->server_line) - n, " weight=%u",
                              *weight->count);
    if (maxconn != NULL && maxconn->is_seen && n < sizeof(v->server_line))
        snprintf(v->server_line + n, sizeof(v->server_line) - n, " max_connections=%u",
                 *maxconn->count);
}

/* POST /pools/P/servers: {"name","address"[,"weight"][,"max_connections"]
 * [,"ephemeral"]} becomes the value of a server line. */
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
        { .name = "ephemeral", .is_bool = true, .flag = &v->is_ephemeral },
    };
    const char *bad = lb_admin_json_object(body, fields, 5);

    if (bad == NULL && (strpbrk(name, " \t") != NULL || strpbrk(address, " \t") != NULL))
        bad = "name and address have no spaces";
    if (bad != NULL) {
        lb_admin_refuse(v, 400, strcmp(bad, "the body lacks a field") == 0
                                    ? "the body needs a name and an address"
                                    : bad);
        return;
    }
    lb_admin_server_line(v, name, address, &fields[2], &fields[3]);
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

/* POST .../heartbeat: an empty body is a pass; else an object of
 * "status", "note", and "address" with an optional "weight": what
 * registers the server as ephemeral when the pool does not have it. */
static void
lb_admin_body_heartbeat(struct lb_admin_span body, struct lb_admin_verdict *v)
{
    static const char *const names[] = { "pass", "warn", "fail" };
    char status[8] = "pass", address[sizeof(((struct conf_addr *)0)->text)];
    uint32_t weight = 1;
    struct lb_admin_field fields[] = {
        { .name = "status", .str = status, .cap = sizeof(status) },
        { .name = "note", .str = v->note, .cap = sizeof(v->note) },
        { .name = "address", .str = address, .cap = sizeof(address) },
        { .name = "weight", .is_count = true, .count = &weight, .max = UINT32_MAX },
    };
    const char *bad;

    v->beat = LB_ADMIN_BEAT_PASS;
    v->note[0] = '\0';
    v->server_line[0] = '\0';
    if (lb_admin_body_is_empty(body))
        return;
    if ((bad = lb_admin_json_object(body, fields, 4)) != NULL) {
        lb_admin_refuse(v, 400, strcmp(bad, "a string too long") == 0
                                    ? "a string too long (a note has at most 127 bytes)"
                                    : bad);
        return;
    }
    if (fields[3].is_seen && !fields[2].is_seen) {
        lb_admin_refuse(v, 400, "weight goes with address (to register the server)");
        return;
    }
    if (fields[2].is_seen && strpbrk(address, " \t") != NULL) {
        lb_admin_refuse(v, 400, "name and address have no spaces");
        return;
    }
    if (fields[2].is_seen) {
        lb_admin_server_line(v, v->server, address, &fields[3], NULL);
        v->is_ephemeral = true;
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

/* The segments {pool} and {server} of a path stand for. */
struct lb_admin_captures {
    struct lb_admin_span pool, server;
};

/* Whether path is pattern (see struct lb_admin_route_row); fills *cap
 * with what its {pool} and {server} stand for. Exactly: case counts, and
 * an empty segment or a trailing '/' matches no pattern that lacks it. */
static bool
lb_admin_path_match(const char *pattern, struct lb_admin_span path, struct lb_admin_captures *cap)
{
    size_t i = 0;

    for (const char *p = pattern; *p != '\0';) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        struct lb_admin_span seg = { path.p + i, 0 };

        if (close == NULL) {
            if (i == path.len || path.p[i] != *p)
                return false;
            i++;
            p++;
            continue;
        }
        while (i < path.len && path.p[i] != '/')
            i++;
        seg.len = (size_t)(path.p + i - seg.p);
        if (seg.len == 0)
            return false;
        if (close - p == 5 && memcmp(p, "{pool", 5) == 0)
            cap->pool = seg;
        else if (close - p == 7 && memcmp(p, "{server", 7) == 0)
            cap->server = seg;
        p = close + 1;
    }
    return i == path.len;
}

/* A row speaks for its method, and GET for HEAD too. */
static bool
lb_admin_row_takes(const struct lb_admin_route_row *row, struct lb_admin_span method,
                   bool is_head)
{
    return lb_admin_span_eq(method, row->method) || (is_head && strcmp(row->method, "GET") == 0);
}

/* Writes prefix, then the n words with ", " between them and last_sep
 * before the last, into out (cap bytes; a table too long for it is cut). */
static void
lb_admin_join(char *out, size_t cap, const char *prefix, const char *const *words, size_t n,
              const char *last_sep)
{
    size_t len = (size_t)snprintf(out, cap, "%s", prefix);

    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s",
                                i == 0 ? "" : i + 1 == n ? last_sep : ", ", words[i]);
}

/* The refusal of a path no row takes with this method, in the contract's
 * order: a path with rows for other methods is a 405 naming them; else,
 * under the API, a 400 that shows the shape; else a 404. */
static void
lb_admin_route_refuse(struct lb_admin_span path, struct lb_admin_verdict *v)
{
    const char *names[LB_ADMIN_NROUTES + 1];    /* a method a row, and HEAD */
    size_t api = sizeof(lb_admin_api) - 1, n = 0;
    size_t base = sizeof(lb_admin_action_pattern) - sizeof("{action}");
    bool is_api = path.len >= api && memcmp(path.p, lb_admin_api, api) == 0 &&
                  (path.len == api || path.p[api] == '/');
    struct lb_admin_captures cap = { 0 };

    for (size_t i = 0; i < LB_ADMIN_NROUTES; i++) {
        const struct lb_admin_route_row *row = &lb_admin_routes[i];
        bool is_known = false;

        if ((is_api && strcmp(row->method, "GET") == 0) ||
            !lb_admin_path_match(row->pattern, path, &cap))
            continue;
        for (size_t k = 0; k < n && !is_known; k++)
            is_known = strcmp(names[k], row->method) == 0;
        if (is_known)
            continue;
        names[n++] = row->method;
        if (strcmp(row->method, "GET") == 0)
            names[n++] = "HEAD";
    }
    if (n > 0) {
        lb_admin_join(v->allow_text, sizeof(v->allow_text), "", names, n, ", ");
        snprintf(v->error_text, sizeof(v->error_text), "method not allowed: use %s", names[0]);
        lb_admin_refuse(v, 405, v->error_text);
        v->allow = v->allow_text;
        return;
    }
    if (!is_api) {
        lb_admin_refuse(v, 404, "not found");
        return;
    }
    if (!lb_admin_path_match(lb_admin_action_pattern, path, &cap)) {
        lb_admin_refuse(v, 400, "bad path: use /pools/POOL[/servers[/SERVER[/ACTION]]]");
        return;
    }
    /* the actions: the rows one segment below a server */
    for (size_t i = 0; i < LB_ADMIN_NROUTES; i++) {
        const char *pattern = lb_admin_routes[i].pattern;

        if (strncmp(pattern, lb_admin_action_pattern, base) == 0 && pattern[base] != '\0' &&
            strchr(pattern + base, '/') == NULL)
            names[n++] = pattern + base;
    }
    lb_admin_join(v->error_text, sizeof(v->error_text), "bad action: use ", names, n, " or ");
    lb_admin_refuse(v, 400, v->error_text);
}

static void
lb_admin_route(const struct conf_admin *admin, const struct lb_admin_head *h,
               struct lb_admin_verdict *v)
{
    struct lb_admin_span path = h->target;
    const char *query = memchr(path.p, '?', path.len);
    const struct lb_admin_route_row *row = NULL;
    struct lb_admin_captures cap = { 0 };
    bool is_authorized;

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
    for (size_t i = 0; i < LB_ADMIN_NROUTES && row == NULL; i++) {
        cap = (struct lb_admin_captures){ 0 };      /* not what a row half matched */
        if (lb_admin_row_takes(&lb_admin_routes[i], h->method, v->is_head) &&
            lb_admin_path_match(lb_admin_routes[i].pattern, path, &cap))
            row = &lb_admin_routes[i];
    }
    if (row == NULL) {
        lb_admin_route_refuse(path, v);
        return;
    }
    v->route = row->route;
    v->action = row->action;
    lb_admin_copy_name(v->pool, cap.pool);
    lb_admin_copy_name(v->server, cap.server);
    is_authorized = row->auth == LB_ADMIN_AUTH_NONE ||
                    (row->auth == LB_ADMIN_AUTH_HEARTBEAT ? lb_admin_beat_is_authorized(admin, h)
                                                          : lb_admin_is_authorized(admin->token, h));
    if (!is_authorized) {
        lb_admin_refuse(v, 401, "unauthorized: send Authorization: Bearer <token>");
        v->is_auth_challenge = true;
    } else if (row->body != NULL) {
        row->body(h->body, v);
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
