/*
 * admin_request_test.c - lb/admin/admin_request.c: one table of raw
 * requests and the decision each must get (parsing, Host and Origin,
 * routes, the token), the Host rules for every kind of listen address, and
 * the rewriting of libevent's error pages. The expected answers are the
 * contract (issue 10 and the README's "Admin port"), written out here, not
 * taken from the code.
 */
#include <stdio.h>
#include <string.h>

#include "admin_request.h"
#include "check.h"
#include "conf_value.h"

#define OK 0                        /* routed: the route is checked */

struct request_case {
    const char *raw;
    size_t len;                     /* 0: strlen(raw) */
    int status;                     /* OK, or the refusal's status */
    enum lb_admin_route route;      /* for OK */
    const char *error;              /* for a refusal: its message (NULL:
                                       not checked) */
    bool must_close;
};

static struct conf_admin
admin_of(const char *listen, const char *token, const char *hosts)
{
    struct conf_admin a;
    char err[256];

    memset(&a, 0, sizeof(a));
    if (conf_parse_addr(listen, true, &a.listen, err, sizeof(err)) != CONF_ADDR_OK ||
        conf_parse_hosts(hosts, &a.allowed_hosts, err, sizeof(err)) != 0) {
        fprintf(stderr, "bad test setup: %s\n", err);
        check_failures++;
    }
    a.token = (char *)token;
    a.heartbeat_token = (char *)"";
    return a;
}

static void
check_cases(const struct conf_admin *a, const struct request_case *cases, size_t n,
            const char *what)
{
    for (size_t i = 0; i < n; i++) {
        const struct request_case *c = &cases[i];
        struct lb_admin_verdict v;
        int status;

        lb_admin_request_check(a, c->raw, c->len ? c->len : strlen(c->raw), &v);
        status = v.route == LB_ADMIN_ROUTE_REFUSED ? v.status : OK;
        if (status != c->status || (status == OK && v.route != c->route) ||
            (status != OK && c->error != NULL && strcmp(v.error, c->error) != 0) ||
            v.must_close != c->must_close) {
            fprintf(stderr, "%s case %zu: %.60s...: got status %d route %d error \"%s\" "
                    "close %d; want %d route %d error \"%s\" close %d\n", what, i, c->raw,
                    status, v.route, v.error ? v.error : "", v.must_close, c->status, c->route,
                    c->error ? c->error : "", c->must_close);
            check_failures++;
        }
    }
}

#define H "Host: 127.0.0.1:9900\r\n"
#define CASES(x) x, sizeof(x) / sizeof(x[0])
/* a literal with a NUL inside, and its length */
#define RAW(x) x, sizeof(x) - 1

static void
test_parsing(void)
{
    static const struct request_case cases[] = {
        { "GET /stats HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_STATS, NULL, false },
        /* evhttp reads LF line ends as well */
        { "GET /stats HTTP/1.1\n" H "\n", 0, OK, LB_ADMIN_ROUTE_STATS, NULL, false },
        /* HTTP/1.0 may omit Host; 1.1 must not */
        { "GET /stats HTTP/1.0\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS, NULL, false },
        { "GET /stats HTTP/1.1\r\n\r\n", 0, 400, 0, "missing Host header", true },
        { "GET /stats HTTP/1.2147483647\r\n" H "\r\n", 0, 400, 0,
          "unsupported HTTP version: use HTTP/1.1 or HTTP/1.0", true },
        { "GET /stats HTTP/1.257\r\n" H "\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.2\r\n" H "\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/2.0\r\n" H "\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/0.9\r\n" H "\r\n", 0, 400, 0, NULL, true },
        { "GET /stats http/1.1\r\n" H "\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.1 \r\n" H "\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.01\r\n" H "\r\n", 0, 400, 0, NULL, true },
        { "GET  /stats HTTP/1.1\r\n" H "\r\n", 0, 400, 0, "bad request line", true },
        { "GET /st ats HTTP/1.1\r\n" H "\r\n", 0, 400, 0, "bad request line", true },
        { "GET /stats\r\n" H "\r\n", 0, 400, 0, "bad request line", true },
        { "\r\nGET /stats HTTP/1.1\r\n" H "\r\n", 0, 400, 0, "bad request line", true },
        { "G(T /stats HTTP/1.1\r\n" H "\r\n", 0, 400, 0, "bad request line", true },
        { "GET /stats HTTP/1.1\r\n" H, 0, 400, 0, "request head does not end", true },
        { "GET /stats HTTP/1.1", 0, 400, 0, "bad request line", true },
        { "", 0, 400, 0, "bad request line", true },
        /* smuggling shapes: libevent takes the first Content-Length and
         * reads what follows as the next request */
        { "POST /reload HTTP/1.1\r\n" H "Content-Length: 0\r\nContent-Length: 20\r\n\r\n", 0,
          400, 0, "two Content-Length headers", true },
        { "POST /reload HTTP/1.1\r\n" H "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 0,
          400, 0, "two Content-Length headers", true },
        { "POST /reload HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
          "0\r\n\r\n", 0, 400, 0, "Transfer-Encoding is not supported: send Content-Length", true },
        { "POST /reload HTTP/1.1\r\n" H "transfer-encoding: chunked\r\n\r\n0\r\n\r\n", 0, 400, 0,
          NULL, true },
        { "POST /reload HTTP/1.1\r\n" H "Content-Length: +3\r\n\r\nabc", 0, 400, 0,
          "bad Content-Length", true },
        { "POST /reload HTTP/1.1\r\n" H "Content-Length: 3x\r\n\r\nabc", 0, 400, 0, NULL, true },
        { "POST /reload HTTP/1.1\r\n" H "Content-Length: -3\r\n\r\nabc", 0, 400, 0, NULL, true },
        { "POST /reload HTTP/1.1\r\n" H "Content-Length:\r\n\r\n", 0, 400, 0, NULL, true },
        { "POST /reload HTTP/1.1\r\n" H "Content-Length: 99999999999999999999\r\n\r\n", 0, 400,
          0, NULL, true },
        /* evhttp framed this many bytes: the body must be exactly CL */
        { "POST /reload HTTP/1.1\r\n" H "Content-Length: 5\r\n\r\nabc", 0, 400, 0,
          "the body does not match Content-Length", true },
        { "POST /reload HTTP/1.1\r\n" H "\r\nabc", 0, 400, 0,
          "the body does not match Content-Length", true },
        /* HEAD has no body for evhttp: the "body" would be a new request */
        { "HEAD /stats HTTP/1.1\r\n" H "Content-Length: 3\r\n\r\n", 0, 400, 0,
          "the body does not match Content-Length", true },
        { "POST /reload HTTP/1.1\r\n" H "Content-Length:  3 \r\n\r\nabc", 0, OK,
          LB_ADMIN_ROUTE_RELOAD, NULL, false },
        { "GET /stats HTTP/1.1\r\n" H "Content-Length: 2\r\n\r\n{}", 0, OK,
          LB_ADMIN_ROUTE_STATS, NULL, false },
        /* header syntax */
        { "GET /stats HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n", 0, 400, 0, "bad header line", true },
        { "GET /stats HTTP/1.1\r\n" H "X-A: 1\r\n folded\r\n\r\n", 0, 400, 0,
          "folded header line", true },
        { "GET /stats HTTP/1.1\r\n" H "\tX-A: 1\r\n\r\n", 0, 400, 0, "folded header line", true },
        { "GET /stats HTTP/1.1\r\n" H "NoColon\r\n\r\n", 0, 400, 0, "bad header line", true },
        { "GET /stats HTTP/1.1\r\n" H ": v\r\n\r\n", 0, 400, 0, "bad header line", true },
        { "GET /stats HTTP/1.1\r\n" H "X-A: a\rb\r\n\r\n", 0, 400, 0,
          "control character in a header", true },
        { "GET /stats HTTP/1.1\r\n" H "X-A: a\x01z\r\n\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.1\r\n" H "X-A: a\x7fz\r\n\r\n", 0, 400, 0, NULL, true },
        { RAW("GET /stats HTTP/1.1\r\n" H "X-A: a\0z\r\n\r\n"), 400, 0,
          "control character in a header", true },
        { "GET /stats HTTP/1.1\r\n" H "X-A: \xc3\xa9\t ok\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS,
          NULL, false },
        { "GET /stats HTTP/1.1\r\n" H "Host: 127.0.0.1\r\n\r\n", 0, 400, 0, "two Host headers",
          true },
        { "GET /stats HTTP/1.1\r\n" H "Origin: a\r\norigin: b\r\n\r\n", 0, 400, 0,
          "two Origin headers", true },
        { "GET /stats HTTP/1.1\r\n" H "Authorization: a\r\nAUTHORIZATION: b\r\n\r\n", 0, 400,
          0, "two Authorization headers", true },
        /* targets and methods */
        { "CONNECT 127.0.0.1:9900 HTTP/1.1\r\n" H "\r\n", 0, 400, 0, "CONNECT is not supported",
          true },
        { "CONNECT / HTTP/1.1\r\n" H "\r\n", 0, 400, 0, "CONNECT is not supported", true },
        { "OPTIONS * HTTP/1.1\r\n" H "\r\n", 0, 400, 0,
          "bad request target: use a path such as /stats", true },
        { "GET http://127.0.0.1:9900/stats HTTP/1.1\r\n" H "\r\n", 0, 400, 0,
          "bad request target: use a path such as /stats", true },
        /* Host syntax */
        { "GET /stats HTTP/1.1\r\nHost: 127.0.0.1:99x\r\n\r\n", 0, 400, 0, "bad Host header", true },
        { "GET /stats HTTP/1.1\r\nHost: 127.0.0.1:\r\n\r\n", 0, 400, 0, "bad Host header", true },
        { "GET /stats HTTP/1.1\r\nHost: 127.0.0.1:1234567\r\n\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.1\r\nHost: [::1\r\n\r\n", 0, 400, 0, "bad Host header", true },
        { "GET /stats HTTP/1.1\r\nHost: [::g]\r\n\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.1\r\nHost: a b\r\n\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.1\r\nHost: a@b\r\n\r\n", 0, 400, 0, NULL, true },
        { "GET /stats HTTP/1.1\r\nHost:\r\n\r\n", 0, 400, 0, NULL, true },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "", "");

    check_cases(&a, CASES(cases), "parsing");
}

static void
test_routes(void)
{
    static const struct request_case cases[] = {
        { "GET / HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL, false },
        { "GET /stats?pretty=1 HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_STATS, NULL, false },
        { "HEAD /metrics HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_METRICS, NULL, false },
        { "GET /healthz HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_HEALTHZ, NULL, false },
        { "GET /ready HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_READY, NULL, false },
        { "POST /ready HTTP/1.1\r\n" H "\r\n", 0, 405, 0, "method not allowed: use GET", false },
        { "POST /reload HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_RELOAD, NULL, false },
        { "POST /pools/web/servers/web1/drain HTTP/1.1\r\n" H "\r\n", 0, OK,
          LB_ADMIN_ROUTE_ACTION, NULL, false },
        /* an unknown path is 404 whatever the method (was 405 for a POST) */
        { "POST /nope HTTP/1.1\r\n" H "\r\n", 0, 404, 0, "not found", false },
        { "GET /nope HTTP/1.1\r\n" H "\r\n", 0, 404, 0, "not found", false },
        { "DELETE /stats/ HTTP/1.1\r\n" H "\r\n", 0, 404, 0, "not found", false },
        { "GET /STATS HTTP/1.1\r\n" H "\r\n", 0, 404, 0, "not found", false },
        { "GET /poolsx HTTP/1.1\r\n" H "\r\n", 0, 404, 0, "not found", false },
        { "POST /stats HTTP/1.1\r\n" H "\r\n", 0, 405, 0, "method not allowed: use GET", false },
        { "GET /reload HTTP/1.1\r\n" H "\r\n", 0, 405, 0, "method not allowed: use POST", false },
        { "HEAD /reload HTTP/1.1\r\n" H "\r\n", 0, 405, 0, NULL, false },
        { "BREW / HTTP/1.1\r\n" H "\r\n", 0, 405, 0, NULL, false },
        { "GET /pools/web/servers/web1/drain HTTP/1.1\r\n" H "\r\n", 0, 405, 0,
          "method not allowed: use POST", false },
        { "POST /pools HTTP/1.1\r\n" H "\r\n", 0, 400, 0,
          "bad path: use /pools/POOL[/servers[/SERVER[/ACTION]]]", false },
        { "POST /pools/web HTTP/1.1\r\n" H "\r\n", 0, 400, 0,
          "bad path: use /pools/POOL[/servers[/SERVER[/ACTION]]]", false },
        /* reads of one pool or one server, without the token */
        { "GET /pools/web HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_POOL, NULL, false },
        { "HEAD /pools/web HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_POOL, NULL, false },
        { "GET /pools/web/servers HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_POOL, NULL,
          false },
        { "GET /pools/web/servers/web1 HTTP/1.1\r\n" H "\r\n", 0, OK, LB_ADMIN_ROUTE_SERVER,
          NULL, false },
        { "GET /pools HTTP/1.1\r\n" H "\r\n", 0, 400, 0, NULL, false },
        { "POST /pools/web/servers/web1 HTTP/1.1\r\n" H "\r\n", 0, 405, 0,
          "method not allowed: use DELETE", false },
        { "DELETE /pools/web/servers/web1 HTTP/1.1\r\n" H "\r\n", 0, OK,
          LB_ADMIN_ROUTE_SERVER_DELETE, NULL, false },
        { "DELETE /pools/web/servers HTTP/1.1\r\n" H "\r\n", 0, 405, 0,
          "method not allowed: use POST", false },
        { "DELETE /pools/web/servers/web1/drain HTTP/1.1\r\n" H "\r\n", 0, 405, 0, NULL, false },
        { "POST /pools/web/servers/web1/drain/ HTTP/1.1\r\n" H "\r\n", 0, 400, 0, NULL, false },
        { "POST /pools/web//servers/web1/drain HTTP/1.1\r\n" H "\r\n", 0, 400, 0, NULL, false },
        { "POST /pools/web/servers/web1/drain/x HTTP/1.1\r\n" H "\r\n", 0, 400, 0, NULL, false },
        { "POST /pools/web/server/web1/drain HTTP/1.1\r\n" H "\r\n", 0, 400, 0, NULL, false },
        { "POST /pools/web/servers/web1/Drain HTTP/1.1\r\n" H "\r\n", 0, 400, 0,
          "bad action: use disable, drain, enable, weight or heartbeat", false },
        /* methods are case-sensitive (RFC 9110 9.1): found by fuzzing */
        { "PoST /reload HTTP/1.1\r\n" H "\r\n", 0, 405, 0, "method not allowed: use POST", false },
        { "get /stats HTTP/1.1\r\n" H "\r\n", 0, 405, 0, NULL, false },
        { "head /stats HTTP/1.1\r\n" H "\r\n", 0, 405, 0, NULL, false },
        { "connect /stats HTTP/1.1\r\n" H "\r\n", 0, 405, 0, NULL, false },
        { "GET /pools/web/SERVERS/web1/drain HTTP/1.1\r\n" H "\r\n", 0, 400, 0, NULL, false },
        /* a malformed path is 400 before the method is looked at */
        { "GET /pools/x/y HTTP/1.1\r\n" H "\r\n", 0, 400, 0, NULL, false },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "", "");
    struct lb_admin_verdict v;
    const char *drain = "POST /pools/web/servers/web1/disable HTTP/1.1\r\n" H "\r\n";
    char longname[200];

    check_cases(&a, CASES(cases), "routes");
    lb_admin_request_check(&a, drain, strlen(drain), &v);
    CHECK_EQ_STR(v.pool, "web");
    CHECK_EQ_STR(v.server, "web1");
    CHECK_EQ_INT(v.action, LB_ADMIN_ACTION_DISABLE);
    CHECK(!v.is_head);
    drain = "HEAD /stats HTTP/1.1\r\n" H "\r\n";
    lb_admin_request_check(&a, drain, strlen(drain), &v);
    CHECK(v.is_head);
    drain = "POST /stats HTTP/1.1\r\n" H "\r\n";
    lb_admin_request_check(&a, drain, strlen(drain), &v);
    CHECK_EQ_STR(v.allow, "GET, HEAD");
    CHECK_EQ_STR(v.reason, "Method Not Allowed");
    /* a name longer than any pool's matches none (404 in admin.c) */
    snprintf(longname, sizeof(longname), "POST /pools/%064d/servers/%063d/enable HTTP/1.1\r\n"
             H "\r\n", 1, 2);
    lb_admin_request_check(&a, longname, strlen(longname), &v);
    CHECK_EQ_INT(v.route, LB_ADMIN_ROUTE_ACTION);
    CHECK_EQ_STR(v.pool, "");
    CHECK_EQ_INT(strlen(v.server), 63);
    CHECK_EQ_INT(v.action, LB_ADMIN_ACTION_ENABLE);
}

#define FORBIDDEN_HOST "forbidden: Host is not this admin port (see [admin] allowed_hosts)"
#define FORBIDDEN_ORIGIN "forbidden: a request from another site (Origin)"

/* The JSON bodies of the members API: exactly the fields named, each
 * once, strings and counts; anything else is a 400 before lb looks at it. */
static void
test_bodies(void)
{
    static const struct {
        const char *body;
        const char *error;
        const char *line;
    } adds[] = {
        { "{\"name\":\"web9\",\"address\":\"10.0.0.9:8080\",\"weight\":2}", NULL,
          "web9 10.0.0.9:8080 weight=2" },
        { "{\"name\":\"e\",\"address\":\"h:1\",\"ephemeral\":true}", NULL, "e h:1" },
        { "{\"ephemeral\": false,\"name\":\"e\",\"address\":\"h:1\"}", NULL, "e h:1" },
        { "{\"name\":\"e\",\"address\":\"h:1\",\"ephemeral\":1}",
          "a flag field is not true or false", NULL },
        { "{\"name\":\"e\",\"address\":\"h:1\",\"ephemeral\":\"true\"}",
          "a flag field is not true or false", NULL },
        { "{\"name\":\"e\",\"address\":\"h:1\",\"ephemeral\":tru}",
          "the body is not valid JSON", NULL },
        { "{\"name\":\"e\",\"address\":\"h:1\",\"ephemeral\":null}",
          "a flag field is not true or false", NULL },
        { "{\"name\":\"e\",\"address\":\"h:1\",\"ephemeral\":truex}",
          "the body is not valid JSON", NULL },
        { " { \"address\" : \"[::1]:80\" , \"name\" : \"a\" } ", NULL, "a [::1]:80" },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"max_connections\":5}", NULL,
          "a b:1 max_connections=5" },
        { "{\"name\":\"a\\\"b\",\"address\":\"x:1\"}", NULL, "a\"b x:1" },
        { "", "the body is not a JSON object", NULL },
        { "[]", "the body is not a JSON object", NULL },
        { "{\"name\":\"a\"}", "the body needs a name and an address", NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"port\":1}", "unknown field in the body", NULL },
        { "{\"name\":\"a\",\"name\":\"b\",\"address\":\"b:1\"}", "a field is given twice in the body",
          NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"weight\":\"2\"}", "a count field is not a number",
          NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"weight\":-1}", "a count field is out of range",
          NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"weight\":99999999999}",
          "a count field is out of range", NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"weight\":2.5}", "a count field is not a number",
          NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"weight\":99999999999999999999}",
          "a count field is out of range", NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\",\"weight\":1e3}", "a count field is not a number",
          NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\"}{}", "more than one JSON object in the body", NULL },
        { "{\"name\":\"a b\",\"address\":\"b:1\"}", "name and address have no spaces", NULL },
        { "{\"name\":\"a\",\"address\":\"b:1\"", "the body is not valid JSON", NULL },
        { "{\"name\":\"\\u0041\",\"address\":\"b:1\"}", NULL, "A b:1" },
        { "{\"name\":\"a\\x\",\"address\":\"b:1\"}", "an unsupported escape in a string", NULL },
        { "{\"name\":\"\\u0000\",\"address\":\"b:1\"}", "an unsupported escape in a string",
          NULL },
        { "{\"name\":\"a\x01\",\"address\":\"b:1\"}", "a control character in a string", NULL },
        { "{\"name\":\"\xff\",\"address\":\"b:1\"}", "the body is not UTF-8", NULL },
        { "{\"name\":\"a\n\",\"address\":\"b:1\"}", "a control character in a string", NULL },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "", "");
    char raw[1024];

    for (size_t i = 0; i < sizeof(adds) / sizeof(adds[0]); i++) {
        struct lb_admin_verdict v;
        int n = snprintf(raw, sizeof(raw),
                         "POST /pools/web/servers HTTP/1.1\r\n" H "Content-Length: %zu\r\n\r\n%s",
                         strlen(adds[i].body), adds[i].body);

        lb_admin_request_check(&a, raw, (size_t)n, &v);
        if (adds[i].error == NULL) {
            CHECK_EQ_INT(v.route, LB_ADMIN_ROUTE_SERVER_ADD);
            CHECK_EQ_STR(v.server_line, adds[i].line);
            /* ephemeral: the flag the body gave */
            CHECK(v.is_ephemeral == (strstr(adds[i].body, "\"ephemeral\":true") != NULL));
            CHECK_EQ_STR(v.pool, "web");
        } else {
            CHECK_EQ_INT(v.route, LB_ADMIN_ROUTE_REFUSED);
            CHECK_EQ_INT(v.status, 400);
            CHECK_EQ_STR(v.error, adds[i].error);
        }
    }
    {
        struct lb_admin_verdict v;
        const char *w = "POST /pools/web/servers/web1/weight HTTP/1.1\r\n" H
                        "Content-Length: 12\r\n\r\n{\"weight\":0}";

        lb_admin_request_check(&a, w, strlen(w), &v);
        CHECK_EQ_INT(v.route, LB_ADMIN_ROUTE_SERVER_WEIGHT);
        CHECK_EQ_INT(v.weight, 0);
        CHECK_EQ_STR(v.server, "web1");
        w = "POST /pools/web/servers/web1/weight HTTP/1.1\r\n" H "Content-Length: 2\r\n\r\n{}";
        lb_admin_request_check(&a, w, strlen(w), &v);
        CHECK_EQ_INT(v.status, 400);
        CHECK_EQ_STR(v.error, "the body has no weight");
    }
}

static void
test_host_and_origin(void)
{
    static const struct request_case v4[] = {
        /* DNS rebinding: the page's own name arrives as Host */
        { "GET /stats HTTP/1.1\r\nHost: evil.example\r\n\r\n", 0, 403, 0, FORBIDDEN_HOST, false },
        { "GET /stats HTTP/1.1\r\nHost: evil.example:9900\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS, NULL,
          false },
        /* any port: tunnels and mapped ports change it, names are what
         * rebinding forges */
        { "GET /stats HTTP/1.1\r\nHost: 127.0.0.1:18000\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS,
          NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: LocalHost:9900\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS,
          NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: localhost.\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: [::1]:9900\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: lb.example.com:80\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS,
          NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: LB.example.COM\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS,
          NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: lb.example.com.evil\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: xlb.example.com\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET /stats HTTP/1.1\r\nHost: 10.0.0.5\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_STATS, NULL,
          false },
        /* Origin: absent (curl), or this port's own as the browser writes
         * it: http:// + the Host it sent */
        { "POST /reload HTTP/1.1\r\n" H "Origin: http://evil.example\r\n\r\n", 0, 403, 0,
          FORBIDDEN_ORIGIN, false },
        { "GET /stats HTTP/1.1\r\n" H "Origin: http://evil.example\r\n\r\n", 0, 403, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Origin: http://127.0.0.1:9900\r\n\r\n", 0, OK,
          LB_ADMIN_ROUTE_RELOAD, NULL, false },
        { "POST /reload HTTP/1.1\r\nHost: localhost:9900\r\nOrigin: http://localhost:9900\r\n\r\n",
          0, OK, LB_ADMIN_ROUTE_RELOAD, NULL, false },
        { "POST /reload HTTP/1.1\r\nHost: lb.example.com\r\nOrigin: HTTP://LB.example.com\r\n\r\n",
          0, OK, LB_ADMIN_ROUTE_RELOAD, NULL, false },
        { "POST /reload HTTP/1.1\r\nHost: localhost:9900\r\nOrigin: http://127.0.0.1:9900\r\n\r\n",
          0, 403, 0, FORBIDDEN_ORIGIN, false },
        { "POST /reload HTTP/1.1\r\n" H "Origin: http://127.0.0.1:9901\r\n\r\n", 0, 403, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Origin: http://127.0.0.1\r\n\r\n", 0, 403, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Origin: https://127.0.0.1:9900\r\n\r\n", 0, 403, 0,
          NULL, false },
        { "POST /reload HTTP/1.1\r\n" H "Origin: http://127.0.0.1:9900/\r\n\r\n", 0, 403, 0,
          NULL, false },
        { "POST /reload HTTP/1.1\r\n" H "Origin: null\r\n\r\n", 0, 403, 0, NULL, false },
        { "POST /reload HTTP/1.1\r\n" H "Origin:\r\n\r\n", 0, 403, 0, NULL, false },
        { "POST /reload HTTP/1.0\r\nOrigin: http://127.0.0.1:9900\r\n\r\n", 0, 403, 0,
          FORBIDDEN_ORIGIN, false },
        /* refused before the route: an unknown path from another site is
         * 403, not 404 */
        { "POST /nope HTTP/1.1\r\n" H "Origin: http://evil.example\r\n\r\n", 0, 403, 0, NULL,
          false },
        { "POST /nope HTTP/1.1\r\nHost: evil.example\r\n\r\n", 0, 403, 0, NULL, false },
    };
    static const struct request_case v6[] = {
        { "GET / HTTP/1.1\r\nHost: [::1]:9900\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL,
          false },
        { "GET / HTTP/1.1\r\nHost: [0:0::1]\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL,
          false },
        { "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL,
          false },
        { "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET / HTTP/1.1\r\nHost: [::2]\r\n\r\n", 0, 403, 0, NULL, false },
        { "POST /reload HTTP/1.1\r\nHost: [::1]:9900\r\nOrigin: http://[::1]:9900\r\n\r\n", 0,
          OK, LB_ADMIN_ROUTE_RELOAD, NULL, false },
    };
    /* the wildcard: reached at any of the host's addresses, so any IP
     * literal of its family; names only localhost and allowed_hosts */
    static const struct request_case any4[] = {
        { "GET / HTTP/1.1\r\nHost: 10.1.2.3:9900\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL,
          false },
        { "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL,
          false },
        { "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET / HTTP/1.1\r\nHost: myhost.lan\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL,
          false },
    };
    static const struct request_case any6[] = {
        { "GET / HTTP/1.1\r\nHost: [fe80::1]:9900\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD,
          NULL, false },
        { "GET / HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n", 0, 403, 0, NULL, false },
        { "GET / HTTP/1.1\r\nHost: myhost.lan\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD, NULL,
          false },
    };
    /* a name as the listen address is one of the port's names */
    static const struct request_case named[] = {
        { "GET / HTTP/1.1\r\nHost: LOCALHOST:9900\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD,
          NULL, false },
        { "GET / HTTP/1.1\r\nHost: 127.0.0.1:9900\r\n\r\n", 0, OK, LB_ADMIN_ROUTE_DASHBOARD,
          NULL, false },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "", "lb.example.com, 10.0.0.5");

    check_cases(&a, CASES(v4), "host v4");
    a = admin_of("[::1]:9900", "", "");
    check_cases(&a, CASES(v6), "host v6");
    a = admin_of("0.0.0.0:9900", "", "");
    check_cases(&a, CASES(any4), "host 0.0.0.0");
    a = admin_of("*:9900", "", "");
    check_cases(&a, CASES(any4), "host *");
    a = admin_of("[::]:9900", "", "myhost.lan");
    check_cases(&a, CASES(any6), "host [::]");
    a = admin_of("localhost:9900", "", "");
    if (a.listen.ss.ss_family == AF_INET)       /* localhost may resolve to ::1 first */
        check_cases(&a, CASES(named), "host named");
}

static void
test_token(void)
{
    static const struct request_case cases[] = {
        { "POST /reload HTTP/1.1\r\n" H "\r\n", 0, 401, 0,
          "unauthorized: send Authorization: Bearer <token>", false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer s3cr3t\r\n\r\n", 0, OK,
          LB_ADMIN_ROUTE_RELOAD, NULL, false },
        /* the scheme is case-insensitive (RFC 9110 11.1), the token not */
        { "POST /reload HTTP/1.1\r\n" H "Authorization: bearer s3cr3t\r\n\r\n", 0, OK,
          LB_ADMIN_ROUTE_RELOAD, NULL, false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization:   Bearer   s3cr3t\r\n\r\n", 0, OK,
          LB_ADMIN_ROUTE_RELOAD, NULL, false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer S3CR3T\r\n\r\n", 0, 401, 0, NULL,
          false },
        /* the exact token only (libevent trims the space and stops at the
         * NUL: both passed before) */
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer s3cr3t \r\n\r\n", 0, 401, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer s3cr3t\t\r\n\r\n", 0, 401, 0,
          NULL, false },
        { RAW("POST /reload HTTP/1.1\r\n" H "Authorization: Bearer s3cr3t\0junk\r\n\r\n"),
          400, 0, "control character in a header", true },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer s3cr3tx\r\n\r\n", 0, 401, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer s3cr3\r\n\r\n", 0, 401, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer x s3cr3t\r\n\r\n", 0, 401, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearers3cr3t\r\n\r\n", 0, 401, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer\r\n\r\n", 0, 401, 0, NULL, false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Basic s3cr3t\r\n\r\n", 0, 401, 0, NULL,
          false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: s3cr3t\r\n\r\n", 0, 401, 0, NULL, false },
        { "POST /reload HTTP/1.1\r\n" H "Authorization: Bearer s3cr3t\r\n"
          "Authorization: Bearer s3cr3t\r\n\r\n", 0, 400, 0, "two Authorization headers", true },
        { "POST /pools/web/servers/web1/drain HTTP/1.1\r\n" H "\r\n", 0, 401, 0, NULL, false },
        /* GETs need no token */
        { "GET /stats HTTP/1.1\r\n" H "Authorization: Bearer wrong\r\n\r\n", 0, OK,
          LB_ADMIN_ROUTE_STATS, NULL, false },
        /* Host and Origin come first: a token does not make another
         * site's request ours */
        { "POST /reload HTTP/1.1\r\n" H "Origin: http://evil.example\r\n"
          "Authorization: Bearer s3cr3t\r\n\r\n", 0, 403, 0, FORBIDDEN_ORIGIN, false },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "s3cr3t", "");
    struct lb_admin_verdict v;
    const char *no_auth = "POST /reload HTTP/1.1\r\n" H "\r\n";

    check_cases(&a, CASES(cases), "token");
    lb_admin_request_check(&a, no_auth, strlen(no_auth), &v);
    CHECK(v.is_auth_challenge);
    a = admin_of("127.0.0.1:9900", "", "");
    lb_admin_request_check(&a, no_auth, strlen(no_auth), &v);
    CHECK_EQ_INT(v.route, LB_ADMIN_ROUTE_RELOAD);
}

/* Every endpoint of the README's table, as a client writes it: the route,
 * the names the path gives, the action; a GET answers HEAD; a query is
 * not part of the path; a route without a body kind reads none. */
static void
test_route_table(void)
{
    static const struct {
        const char *method, *path;
        enum lb_admin_route route;
        const char *pool, *server;
        int action;                 /* -1: not an action */
    } cases[] = {
        { "GET", "/", LB_ADMIN_ROUTE_DASHBOARD, "", "", -1 },
        { "HEAD", "/stats", LB_ADMIN_ROUTE_STATS, "", "", -1 },
        { "GET", "/metrics?name[]=x", LB_ADMIN_ROUTE_METRICS, "", "", -1 },
        { "HEAD", "/healthz", LB_ADMIN_ROUTE_HEALTHZ, "", "", -1 },
        { "HEAD", "/ready", LB_ADMIN_ROUTE_READY, "", "", -1 },
        { "POST", "/reload?now", LB_ADMIN_ROUTE_RELOAD, "", "", -1 },
        { "GET", "/pools/web?x=1", LB_ADMIN_ROUTE_POOL, "web", "", -1 },
        { "HEAD", "/pools/web/servers", LB_ADMIN_ROUTE_POOL, "web", "", -1 },
        { "HEAD", "/pools/web/servers/web1", LB_ADMIN_ROUTE_SERVER, "web", "web1", -1 },
        { "GET", "/pools/servers/servers/servers", LB_ADMIN_ROUTE_SERVER, "servers", "servers",
          -1 },
        { "DELETE", "/pools/web/servers/web9", LB_ADMIN_ROUTE_SERVER_DELETE, "web", "web9", -1 },
        { "POST", "/pools/web/servers/web1/enable", LB_ADMIN_ROUTE_ACTION, "web", "web1",
          LB_ADMIN_ACTION_ENABLE },
        { "POST", "/pools/web/servers/web1/drain?x", LB_ADMIN_ROUTE_ACTION, "web", "web1",
          LB_ADMIN_ACTION_DRAIN },
        { "POST", "/pools/a.b-c_d/servers/{server}/disable", LB_ADMIN_ROUTE_ACTION, "a.b-c_d",
          "{server}", LB_ADMIN_ACTION_DISABLE },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "", "");
    char raw[512];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct lb_admin_verdict v;
        /* a body that no JSON reader takes: read by none of these */
        int n = snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\n" H "Content-Length: %d\r\n\r\n%s",
                         cases[i].method, cases[i].path, strcmp(cases[i].method, "HEAD") ? 3 : 0,
                         strcmp(cases[i].method, "HEAD") ? "x{]" : "");

        lb_admin_request_check(&a, raw, (size_t)n, &v);
        CHECK_EQ_INT(v.route, cases[i].route);
        CHECK_EQ_STR(v.pool, cases[i].pool);
        CHECK_EQ_STR(v.server, cases[i].server);
        CHECK_EQ_INT(v.is_head, strcmp(cases[i].method, "HEAD") == 0);
        if (cases[i].action >= 0)
            CHECK_EQ_INT(v.action, cases[i].action);
        if (v.route != cases[i].route)
            fprintf(stderr, "  route case %zu: %s %s\n", i, cases[i].method, cases[i].path);
    }
}

/* 405: Allow names the methods the path has rows for (GET with HEAD),
 * under /pools/ its writes only; the error names the first. A path whose
 * only rows are reads of the API is a bad path for any other method. */
static void
test_allow(void)
{
    static const struct {
        const char *method, *path;
        int status;
        const char *allow, *error;
    } cases[] = {
        { "PUT", "/", 405, "GET, HEAD", "method not allowed: use GET" },
        { "DELETE", "/metrics?x", 405, "GET, HEAD", "method not allowed: use GET" },
        { "OPTIONS", "/healthz", 405, "GET, HEAD", "method not allowed: use GET" },
        { "PATCH", "/reload", 405, "POST", "method not allowed: use POST" },
        { "PUT", "/pools/web/servers", 405, "POST", "method not allowed: use POST" },
        { "PUT", "/pools/web/servers/web1", 405, "DELETE", "method not allowed: use DELETE" },
        { "HEAD", "/pools/web/servers/web1/enable", 405, "POST", "method not allowed: use POST" },
        { "GET", "/pools/web/servers/web1/weight", 405, "POST", "method not allowed: use POST" },
        { "DELETE", "/pools/web/servers/web1/heartbeat", 405, "POST",
          "method not allowed: use POST" },
        { "DELETE", "/pools/web", 400, NULL,
          "bad path: use /pools/POOL[/servers[/SERVER[/ACTION]]]" },
        { "PUT", "/pools/web/servers/web1/weigh", 400, NULL,
          "bad action: use disable, drain, enable, weight or heartbeat" },
        { "GET", "/pools/web/servers/web1/weight/", 400, NULL,
          "bad path: use /pools/POOL[/servers[/SERVER[/ACTION]]]" },
        { "PUT", "/reload/", 404, NULL, "not found" },
        { "GET", "/pools/web/servers/web1", 0, NULL, NULL },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "s3cr3t", "");
    char raw[512];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct lb_admin_verdict v;
        int n = snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\n" H "\r\n", cases[i].method,
                         cases[i].path);

        lb_admin_request_check(&a, raw, (size_t)n, &v);
        CHECK_EQ_INT(v.status, cases[i].status);
        CHECK((v.allow == NULL) == (cases[i].allow == NULL));
        if (cases[i].allow != NULL && v.allow != NULL)
            CHECK_EQ_STR(v.allow, cases[i].allow);
        if (cases[i].error != NULL)
            CHECK_EQ_STR(v.error, cases[i].error);
        CHECK(!v.must_close);
        if (v.status != cases[i].status)
            fprintf(stderr, "  allow case %zu: %s %s\n", i, cases[i].method, cases[i].path);
    }
}

/* libevent's evhttp_send_error page, as it writes it. */
static size_t
libevent_page(char *buf, size_t len, int code, const char *reason, size_t pad)
{
    char page[512];
    int n = snprintf(page, sizeof(page),
                     "<HTML><HEAD>\n<TITLE>%d %s</TITLE>\n</HEAD><BODY>\n<H1>%s</H1>\n"
                     "</BODY></HTML>\n", code, reason, reason);

    return (size_t)snprintf(buf, len, "HTTP/1.1 %d %s%*s\r\nContent-Type: text/html\r\n"
                            "Connection: close\r\nContent-Length: %d\r\n\r\n%s", code, reason,
                            (int)pad, "", n, page);
}

static void
test_error_page(void)
{
    char in[8192], out[512];
    size_t n;

    n = libevent_page(in, sizeof(in), 400, "Bad Request", 0);
    n = lb_admin_error_page_json(in, n, out, sizeof(out));
    CHECK_EQ_STR(out, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                 "Connection: close\r\nContent-Length: 24\r\n\r\n{\"error\":\"bad request\"}\n");
    CHECK_EQ_INT(n, strlen(out));
    n = libevent_page(in, sizeof(in), 413, "Payload Too Large", 0);
    CHECK(lb_admin_error_page_json(in, n, out, sizeof(out)) > 0);
    CHECK(strstr(out, "{\"error\":\"request body too large\"}\n") != NULL);
    n = libevent_page(in, sizeof(in), 501, "Not Implemented", 0);
    CHECK(lb_admin_error_page_json(in, n, out, sizeof(out)) > 0);
    CHECK(strstr(out, "HTTP/1.1 501 Not Implemented\r\n") == out);
    CHECK(strstr(out, "{\"error\":\"method not implemented\"}\n") != NULL);
    /* not a refusal, not libevent's page, too short or too long: as is */
    n = libevent_page(in, sizeof(in), 200, "OK", 0);
    CHECK_EQ_INT(lb_admin_error_page_json(in, n, out, sizeof(out)), 0);
    n = libevent_page(in, sizeof(in), 400, "Bad Request", 0);
    CHECK_EQ_INT(lb_admin_error_page_json(in, n - 1, out, sizeof(out)), 0);
    CHECK_EQ_INT(lb_admin_error_page_json(in, 39, out, sizeof(out)), 0);
    n = libevent_page(in, sizeof(in), 400, "Bad Request", 4000);
    CHECK(n > 4096);
    CHECK_EQ_INT(lb_admin_error_page_json(in, n, out, sizeof(out)), 0);
    /* A status line with no CR in its first 64 bytes: the old rewriter
     * stored through strchr()'s NULL here. */
    n = libevent_page(in, sizeof(in), 400, "Bad Request", 80);
    CHECK_EQ_INT(lb_admin_error_page_json(in, n, out, sizeof(out)), 0);
    memcpy(in, "HTTP/1.1 4x0", 12);
    n = libevent_page(in + 12, sizeof(in) - 12, 400, "Bad Request", 0) + 12;
    CHECK_EQ_INT(lb_admin_error_page_json(in, n, out, sizeof(out)), 0);
    /* a status line that is not libevent's: a NUL or a bare CR in it
     * (found by fuzzing) */
    n = libevent_page(in, sizeof(in), 400, "Bad Request", 0);
    in[14] = '\0';
    CHECK_EQ_INT(lb_admin_error_page_json(in, n, out, sizeof(out)), 0);
    n = libevent_page(in, sizeof(in), 400, "Bad Request", 0);
    in[14] = '\r';
    CHECK_EQ_INT(lb_admin_error_page_json(in, n, out, sizeof(out)), 0);
    /* out too small: nothing written that does not fit */
    n = libevent_page(in, sizeof(in), 400, "Bad Request", 0);
    CHECK_EQ_INT(lb_admin_error_page_json(in, n, out, 40), 0);
}

/* POST .../heartbeat: an optional body; the operator's token or the
 * heartbeat_token, open when neither is set. */
static void
test_heartbeat(void)
{
    static const struct {
        const char *body;
        enum lb_admin_beat beat;
        const char *note, *error;
    } cases[] = {
        { "", LB_ADMIN_BEAT_PASS, "", NULL },
        { " \r\n", LB_ADMIN_BEAT_PASS, "", NULL },
        { "{}", LB_ADMIN_BEAT_PASS, "", NULL },
        { "{\"status\":\"warn\",\"note\":\"queue 900\"}", LB_ADMIN_BEAT_WARN, "queue 900", NULL },
        { "{\"note\":\"x\",\"status\":\"fail\"}", LB_ADMIN_BEAT_FAIL, "x", NULL },
        { "{\"status\":\"ok\"}", 0, NULL, "status: use pass, warn or fail" },
        { "{\"status\":\"pass\",\"weight\":1}", 0, NULL,
          "weight goes with address (to register the server)" },
        { "{\"address\":\"10.0.0.9:80\"}", LB_ADMIN_BEAT_PASS, "", NULL },
        { "{\"weight\":7,\"address\":\"h:80\",\"status\":\"warn\"}", LB_ADMIN_BEAT_WARN, "",
          NULL },
        { "{\"address\":\"h 80\"}", 0, NULL, "name and address have no spaces" },
        { "{\"status\":\"pass\",\"port\":1}", 0, NULL, "unknown field in the body" },
        { "{\"status\":1}", 0, NULL, "expected a string" },
        { "pass", 0, NULL, "the body is not a JSON object" },
        { "{\"note\":\"0123456789012345678901234567890123456789012345678901234567890123"
          "4567890123456789012345678901234567890123456789012345678901234567\"}", 0, NULL,
          "a string too long (a note has at most 127 bytes)" },
    };
    struct conf_admin a = admin_of("127.0.0.1:9900", "", "");
    struct lb_admin_verdict v;
    char raw[1024];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = snprintf(raw, sizeof(raw), "POST /pools/web/servers/web1/heartbeat HTTP/1.1\r\n"
                         H "Content-Length: %zu\r\n\r\n%s", strlen(cases[i].body),
                         cases[i].body);

        lb_admin_request_check(&a, raw, (size_t)n, &v);
        if (cases[i].error == NULL) {
            CHECK_EQ_INT(v.route, LB_ADMIN_ROUTE_HEARTBEAT);
            CHECK_EQ_INT(v.beat, cases[i].beat);
            CHECK_EQ_STR(v.note, cases[i].note);
            CHECK_EQ_STR(v.pool, "web");
            CHECK_EQ_STR(v.server, "web1");
            /* an address registers the server (the path's name) */
            CHECK_EQ_STR(v.server_line, strstr(cases[i].body, "10.0.0.9") ? "web1 10.0.0.9:80"
                                        : strstr(cases[i].body, "h:80") ? "web1 h:80 weight=7"
                                                                         : "");
            CHECK(v.is_ephemeral == (v.server_line[0] != '\0'));
        } else {
            CHECK_EQ_INT(v.status, 400);
            CHECK_EQ_STR(v.error, cases[i].error);
        }
    }
    /* tokens: [token, heartbeat_token, Authorization, heartbeat ok, enable ok] */
    {
        static const struct {
            const char *token, *hb, *auth;
            bool beat_ok, action_ok;
        } t[] = {
            { "", "", NULL, true, true },
            { "op", "", NULL, false, false },
            { "op", "", "op", true, true },
            { "", "hb", NULL, false, true },
            { "", "hb", "hb", true, true },
            { "op", "hb", "hb", true, false },
            { "op", "hb", "op", true, true },
            { "op", "hb", "nope", false, false },
        };

        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
            const char *paths[] = { "heartbeat", "enable" };

            a.token = (char *)t[i].token;
            a.heartbeat_token = (char *)t[i].hb;
            for (int k = 0; k < 2; k++) {
                int n = snprintf(raw, sizeof(raw), "POST /pools/web/servers/web1/%s HTTP/1.1\r\n"
                                 H "%s%s%sContent-Length: 0\r\n\r\n", paths[k],
                                 t[i].auth ? "Authorization: Bearer " : "",
                                 t[i].auth ? t[i].auth : "", t[i].auth ? "\r\n" : "");
                bool ok = k == 0 ? t[i].beat_ok : t[i].action_ok;

                lb_admin_request_check(&a, raw, (size_t)n, &v);
                CHECK_EQ_INT(v.status, ok ? 0 : 401);
                if ((v.status == 0) != ok)
                    fprintf(stderr, "  token case %zu, %s\n", i, paths[k]);
            }
        }
    }
}

int
main(void)
{
    test_parsing();
    test_routes();
    test_bodies();
    test_host_and_origin();
    test_token();
    test_route_table();
    test_allow();
    test_error_page();
    test_heartbeat();
    return CHECK_DONE();
}
