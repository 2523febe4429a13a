/*
 * admin_request.h - what the admin port decides about one request, from
 * the bytes the client sent: pure (no libevent, no clock, no global
 * state), so that the unit test and the fuzz targets run the very code
 * the evhttp callbacks run.
 *
 * evhttp frames the requests (it reads the head, then the body by its
 * Content-Length) and writes the answers; admin.c hands each request's
 * own bytes, exactly as received, to lb_admin_request_check, which parses
 * them again strictly and refuses whatever evhttp would read differently
 * from a strict HTTP/1.1 parser (RFC 9112): libevent 2.1 trims header
 * values, stops them at a NUL, keeps the first of two Content-Length
 * headers and truncates the version into a char. Any thread.
 */
#ifndef LB_ADMIN_REQUEST_H
#define LB_ADMIN_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "conf.h"

/* Request line and headers together (evhttp's limit, and so ours); a
 * longer head is refused before any handler runs. */
#define LB_ADMIN_MAX_HEADERS 8192
/* POST bodies are small JSON objects (a server to add, a weight):
 * anything longer is refused. */
#define LB_ADMIN_MAX_BODY 1024

/* What a request becomes: the id that joins a row of admin_request.c's
 * route table (method, path, auth, body) to its handler in admin.c's
 * lb_admin_handlers[]. A new endpoint: a value here, its row, its handler. */
enum lb_admin_route {
    LB_ADMIN_ROUTE_REFUSED = 0,         /* answer the verdict's error */
    LB_ADMIN_ROUTE_DASHBOARD,           /* GET / */
    LB_ADMIN_ROUTE_STATS,               /* GET /stats */
    LB_ADMIN_ROUTE_METRICS,             /* GET /metrics */
    LB_ADMIN_ROUTE_HEALTHZ,             /* GET /healthz */
    LB_ADMIN_ROUTE_READY,               /* GET /ready */
    LB_ADMIN_ROUTE_ACTION,              /* POST /pools/P/servers/S/ACTION */
    LB_ADMIN_ROUTE_RELOAD,              /* POST /reload */
    LB_ADMIN_ROUTE_SERVER_ADD,          /* POST /pools/P/servers */
    LB_ADMIN_ROUTE_SERVER_DELETE,       /* DELETE /pools/P/servers/S */
    LB_ADMIN_ROUTE_SERVER_WEIGHT,       /* POST /pools/P/servers/S/weight */
    LB_ADMIN_ROUTE_HEARTBEAT,           /* POST /pools/P/servers/S/heartbeat */
    LB_ADMIN_ROUTE_POOL,                /* GET /pools/P (and /pools/P/servers) */
    LB_ADMIN_ROUTE_SERVER,              /* GET /pools/P/servers/S */
    LB_ADMIN_ROUTE_COUNT                /* not a route: how many there are */
};

/* A heartbeat's status (its body's "status", default pass). */
enum lb_admin_beat {
    LB_ADMIN_BEAT_PASS = 0,
    LB_ADMIN_BEAT_WARN,
    LB_ADMIN_BEAT_FAIL,
};
#define LB_ADMIN_NOTE_MAX 128           /* a heartbeat's "note", NUL included */

enum lb_admin_action {
    LB_ADMIN_ACTION_ENABLE = 0,
    LB_ADMIN_ACTION_DRAIN,
    LB_ADMIN_ACTION_DISABLE,
};

struct lb_admin_verdict {
    enum lb_admin_route route;
    bool is_head;                       /* answer with headers only */
    /* REFUSED: the answer. error is a literal, or built of literals in
     * error_text (no escaping needed either way). */
    int status;                         /* 400, 401, 403, 404 or 405 */
    const char *reason;                 /* "Bad Request", ... */
    const char *error;
    const char *allow;                  /* 405: the Allow header */
    bool is_auth_challenge;             /* 401: send WWW-Authenticate */
    bool must_close;                    /* close after answering: the bytes
                                           that follow cannot be trusted */
    /* The answers written from the route table (a 405's Allow and its
     * error, the actions a bad action could have been): allow and error
     * point here then, so they are good as long as *v is. */
    char allow_text[64];
    char error_text[128];
    /* The path's {pool} and {server} (see the route table); ACTION: which */
    char pool[CONF_NAME_MAX + 1];
    char server[CONF_NAME_MAX + 1];
    enum lb_admin_action action;
    /* SERVER_ADD: the body's {"name","address","weight","max_connections"},
     * as a server line's value ("NAME ADDRESS weight=N ...") for the
     * config's own parser to judge, and its "ephemeral". HEARTBEAT: its
     * {"address"[,"weight"]} with the path's name, the same way (to
     * register an ephemeral server it does not know; "" without).
     * SERVER_WEIGHT: {"weight"}. */
    char server_line[2 * sizeof(((struct conf_addr *)0)->text)];
    bool is_ephemeral;
    uint32_t weight;
    /* HEARTBEAT: the optional body {"status":"pass|warn|fail","note":"..."} */
    enum lb_admin_beat beat;
    char note[LB_ADMIN_NOTE_MAX];
};

/* Decides about one request: raw[0..len) is its head and body exactly as
 * received (nothing before, nothing after). A body is read only as the
 * JSON object of the route that takes one (400 when it is not one: an
 * unknown or repeated field, a missing one, a value of the wrong type). admin holds what the port
 * accepts: its listen address, allowed_hosts and token. Fills *v; never
 * fails (a request it cannot read is a refusal). In order:
 *   - 400 and close: not strict HTTP/1.0 or 1.1 (request line, version,
 *     header syntax, NUL or control bytes, folded lines), CONNECT, a target
 *     that is not a path, a Host, Origin, Authorization or Content-Length
 *     header given twice, any Transfer-Encoding, a body that does not
 *     match Content-Length, HTTP/1.1 without Host;
 *   - 403: a Host that is not the listen address, localhost or an allowed
 *     host, or an Origin present and not this port's own (http:// + Host);
 *   - 404 for an unknown path (whatever the method), 405 with Allow for a
 *     wrong method (the methods of the path's rows; under /pools/ its
 *     writes), 400 for a malformed /pools/ path or a body;
 *   - 401 for a POST without "Authorization: Bearer <token>", the exact
 *     token, when one is set; a heartbeat takes the token or the
 *     heartbeat_token (open when neither is set). */
void lb_admin_request_check(const struct conf_admin *admin, const char *raw,
                            size_t len, struct lb_admin_verdict *v);

/* libevent 2.1 answers what it refuses itself (garbage, oversized heads or
 * bodies, unknown methods) with an HTML page, and has no hook for it. When
 * in[0..len) is such an answer, writes the same status with a JSON error
 * body into out (outlen bytes) and returns its length; else returns 0. */
size_t lb_admin_error_page_json(const char *in, size_t len, char *out,
                                size_t outlen);

#endif /* LB_ADMIN_REQUEST_H */
