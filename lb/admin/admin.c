/*
 * admin.c - the admin port: stats, metrics, the dashboard and operator
 * actions, on libevent's evhttp, served from a thread of its own so that a
 * slow admin client never delays the data path or the health checks.
 *
 *   GET  /                 the dashboard (HTML, no external assets)
 *   GET  /stats            JSON
 *   GET  /metrics          Prometheus text format
 *   GET  /healthz          "ok"
 *   POST /pools/{pool}/servers/{server}/{disable|drain|enable}
 *   POST /reload           the same as SIGHUP, answered with its outcome
 *
 * Server state is changed under daemon->state_lock (see control/server.c)
 * and copied under it for the documents, which are written without it;
 * counters written by the workers are atomics read without a lock.
 * Bad input is bounded by evhttp's limits: header and body sizes and an
 * idle timeout per connection.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>

#include "admin.h"
#include "daemon.h"

/* Request line and headers together; a 1 MB header or a 100 KB request
 * line is refused without being buffered. */
#define LB_ADMIN_MAX_HEADERS 8192
/* POST bodies carry nothing: anything beyond a few bytes is refused. */
#define LB_ADMIN_MAX_BODY 1024
/* Seconds an admin connection may stay idle or unread. */
#define LB_ADMIN_TIMEOUT_S 10

struct lb_admin {
    struct lb_daemon *d;
    pthread_t thread;
    bool is_running;
    struct event_base *base;
    struct evhttp *http;
    struct event *stop_ev;              /* lb_admin_stop ends the loop */
};

extern const char lb_admin_dashboard_html[];    /* admin_dashboard.c, generated */


static void
lb_admin_reply(struct evhttp_request *req, int code, const char *reason,
               const char *type, struct evbuffer *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        /* libevent 2.1 would send the body after a HEAD: send its length
         * only, as HTTP wants. */
        char len[24];

        snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
        evhttp_add_header(h, "Content-Length", len);
        evbuffer_drain(body, evbuffer_get_length(body));
    }
    evhttp_send_reply(req, code, reason, body);
}

static void
lb_admin_error(struct evhttp_request *req, int code, const char *reason,
               const char *message)
{
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    /* message is always one of our own literals: no escaping needed */
    evbuffer_add_printf(b, "{\"error\":\"%s\"}\n", message);
    lb_admin_reply(req, code, reason, "application/json", b);
    evbuffer_free(b);
}

static bool
lb_admin_authorized(struct lb_admin *a, struct evhttp_request *req)
{
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req),
                                          "Authorization");
    const char *token;
    size_t tlen, alen;
    bool ok;

    if (auth != NULL && strncmp(auth, "Bearer ", 7) == 0)
        auth += 7;
    else
        auth = NULL;
    /* The token comes from the current generation: a reload may change it,
     * and swaps the generation under this lock. */
    pthread_mutex_lock(&a->d->state_lock);
    token = a->d->gen->conf->admin.token;
    tlen = strlen(token);
    alen = auth != NULL ? strlen(auth) : 0;
    /* Constant time over the token's length: the time taken tells an
     * attacker nothing about how many leading bytes matched. */
    ok = tlen == 0 || (auth != NULL && alen == tlen && CRYPTO_memcmp(auth, token, tlen) == 0);
    pthread_mutex_unlock(&a->d->state_lock);
    return ok;
}

/* Splits "/pools/P/servers/S/ACTION" into its parts (in buf). */
static int
lb_admin_parse_action_path(char *buf, char **pool, char **server, char **action)
{
    char *parts[6];
    size_t n = 0;
    char *save = NULL;

    if (buf[0] != '/')
        return -1;
    /* Empty segments ("//") are a bad path, not something to skip. */
    if (strstr(buf, "//") != NULL || buf[strlen(buf) - 1] == '/')
        return -1;
    for (char *t = strtok_r(buf, "/", &save); t != NULL; t = strtok_r(NULL, "/", &save)) {
        if (n == 6)
            return -1;
        parts[n++] = t;
    }
    if (n != 5 || strcmp(parts[0], "pools") != 0 || strcmp(parts[2], "servers") != 0)
        return -1;
    *pool = parts[1];
    *server = parts[3];
    *action = parts[4];
    return 0;
}

static struct lb_server *
lb_admin_find_server(struct lb_daemon *d, const char *pool, const char *server,
                     bool *pool_found)
{
    struct lb_gen *g = d->gen;

    *pool_found = false;
    for (size_t i = 0; i < g->conf->npools; i++) {
        struct lb_pool *p = &g->pools[i];

        if (strcmp(p->conf->name, pool) != 0)
            continue;
        *pool_found = true;
        for (size_t k = 0; k < p->conf->nservers; k++) {
            if (strcmp(p->servers[k].conf->name, server) == 0)
                return &p->servers[k];
        }
    }
    return NULL;
}

static void
lb_admin_action(struct lb_admin *a, struct evhttp_request *req, const char *path)
{
    static const struct { const char *name; enum bal_admin admin; } actions[] = {
        { "enable", BAL_ADMIN_NONE },
        { "drain", BAL_ADMIN_DRAIN },
        { "disable", BAL_ADMIN_DISABLE },
    };
    char buf[512];
    char *pool, *server, *action;
    struct lb_server *srv;
    struct lb_server_view *view;
    struct lb_gen *gen = NULL;
    struct evbuffer *b;
    bool pool_found;
    size_t i;

    if (strlen(path) >= sizeof(buf)) {
        lb_admin_error(req, HTTP_BADREQUEST, "Bad Request", "bad path");
        return;
    }
    strcpy(buf, path);
    if (lb_admin_parse_action_path(buf, &pool, &server, &action) == -1) {
        lb_admin_error(req, HTTP_BADREQUEST, "Bad Request",
                       "bad path: use /pools/POOL/servers/SERVER/disable|drain|enable");
        return;
    }
    for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
        if (strcmp(actions[i].name, action) == 0)
            break;
    }
    if (i == sizeof(actions) / sizeof(actions[0])) {
        lb_admin_error(req, HTTP_BADREQUEST, "Bad Request",
                       "bad action: use disable, drain or enable");
        return;
    }
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
        lb_admin_error(req, 405, "Method Not Allowed", "method not allowed: use POST");
        return;
    }
    if (!lb_admin_authorized(a, req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"lb\"");
        lb_admin_error(req, 401, "Unauthorized", "unauthorized: send Authorization: Bearer <token>");
        return;
    }
    b = evbuffer_new();
    view = lb_admin_view_new();
    if (b == NULL || view == NULL) {
        if (b != NULL)
            evbuffer_free(b);
        free(view);
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    pthread_mutex_lock(&a->d->state_lock);
    srv = lb_admin_find_server(a->d, pool, server, &pool_found);
    if (srv != NULL) {
        lb_server_set_admin(a->d, srv, actions[i].admin);
        lb_admin_view_take(srv, view);
        /* the view names srv's generation: keep it until written */
        gen = a->d->gen;
        lb_gen_ref(gen);
    }
    pthread_mutex_unlock(&a->d->state_lock);
    if (srv != NULL) {
        lb_admin_server_json(a->d, view, b);
        evbuffer_add(b, "\n", 1);
        lb_gen_unref(gen);
    }
    free(view);
    if (srv == NULL)
        lb_admin_error(req, HTTP_NOTFOUND, "Not Found",
                       pool_found ? "no such server in this pool" : "no such pool");
    else
        lb_admin_reply(req, HTTP_OK, "OK", "application/json", b);
    evbuffer_free(b);
}

/* The same as SIGHUP, answered with its outcome: 200, or 400 with the
 * config errors (the old config keeps serving). The admin thread waits for
 * main; the data path does not. */
static void
lb_admin_reload(struct lb_admin *a, struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    char msg[1024];
    uint64_t generation;

    if (b == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    if (lb_reload_request(a->d, msg, sizeof(msg)) == 0) {
        pthread_mutex_lock(&a->d->state_lock);
        generation = a->d->gen->number;
        pthread_mutex_unlock(&a->d->state_lock);
        evbuffer_add_printf(b, "{\"reloaded\":true,\"generation\":%llu}\n",
                            (unsigned long long)generation);
        lb_admin_reply(req, HTTP_OK, "OK", "application/json", b);
    } else {
        evbuffer_add(b, "{\"error\":", 9);
        lb_json_str(b, msg);
        evbuffer_add(b, "}\n", 2);
        lb_admin_reply(req, HTTP_BADREQUEST, "Bad Request", "application/json", b);
    }
    evbuffer_free(b);
}

static void
lb_admin_get(struct lb_admin *a, struct evhttp_request *req, const char *path)
{
    struct evbuffer *b;

    if (strcmp(path, "/") != 0 && strcmp(path, "/stats") != 0 &&
        strcmp(path, "/metrics") != 0 && strcmp(path, "/healthz") != 0) {
        lb_admin_error(req, HTTP_NOTFOUND, "Not Found", "not found");
        return;
    }
    b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    if (strcmp(path, "/") == 0) {
        evbuffer_add_reference(b, lb_admin_dashboard_html, strlen(lb_admin_dashboard_html),
                               NULL, NULL);
        lb_admin_reply(req, HTTP_OK, "OK", "text/html; charset=utf-8", b);
    } else if (strcmp(path, "/stats") == 0) {
        if (lb_admin_stats_json(a->d, b) == -1)
            evhttp_send_error(req, HTTP_INTERNAL, NULL);
        else
            lb_admin_reply(req, HTTP_OK, "OK", "application/json", b);
    } else if (strcmp(path, "/metrics") == 0) {
        if (lb_admin_metrics(a->d, b) == -1)
            evhttp_send_error(req, HTTP_INTERNAL, NULL);
        else
            lb_admin_reply(req, HTTP_OK, "OK", "text/plain; version=0.0.4; charset=utf-8", b);
    } else {
        evbuffer_add(b, "ok\n", 3);
        lb_admin_reply(req, HTTP_OK, "OK", "text/plain; charset=utf-8", b);
    }
    evbuffer_free(b);
}

static void
lb_admin_on_request(struct evhttp_request *req, void *arg)
{
    struct lb_admin *a = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

    if (path == NULL || path[0] != '/') {
        lb_admin_error(req, HTTP_BADREQUEST, "Bad Request", "bad path");
        return;
    }
    if (strncmp(path, "/pools/", 7) == 0 || strcmp(path, "/pools") == 0) {
        lb_admin_action(a, req, path);
        return;
    }
    if (strcmp(path, "/reload") == 0) {
        if (cmd != EVHTTP_REQ_POST) {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
            lb_admin_error(req, 405, "Method Not Allowed", "method not allowed: use POST");
        } else if (!lb_admin_authorized(a, req)) {
            lb_admin_error(req, 401, "Unauthorized", "unauthorized: send Authorization: Bearer <token>");
        } else {
            lb_admin_reload(a, req);
        }
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        lb_admin_error(req, 405, "Method Not Allowed", "method not allowed: use GET");
        return;
    }
    lb_admin_get(a, req, path);
}

/*
 * Requests that evhttp refuses before any handler sees them (garbage, a
 * header or request line over the limit, a body over the limit, an unknown
 * method) get libevent's own HTML error page, and libevent 2.1 has no hook
 * for it (2.2's evhttp_set_errorcb). The contract wants every error as JSON,
 * so the page is rewritten in the connection's output buffer when it is the
 * whole of it: libevent writes the status line, headers and page into the
 * buffer in one go and only sends it from the event loop later.
 */
static void
lb_admin_on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    static const char page_end[] = "</BODY></HTML>\n";
    static const char page_mark[] = "\r\n\r\n<HTML><HEAD>\n<TITLE>";
    size_t len = evbuffer_get_length(buf);
    struct evbuffer_ptr mark;
    char head[64], body[96], tail[sizeof(page_end) - 1];
    int code, n;

    if (info->n_added == 0 || len < 40 || len > 4096)
        return;
    if (evbuffer_copyout(buf, head, sizeof(head) - 1) < 12)
        return;
    if (evbuffer_ptr_set(buf, &mark, len - sizeof(tail), EVBUFFER_PTR_SET) == -1 ||
        evbuffer_copyout_from(buf, &mark, tail, sizeof(tail)) != (ssize_t)sizeof(tail) ||
        memcmp(tail, page_end, sizeof(tail)) != 0)
        return;
    head[sizeof(head) - 1] = '\0';
    mark = evbuffer_search(buf, page_mark, sizeof(page_mark) - 1, NULL);
    if (mark.pos < 0 || strncmp(head, "HTTP/1.", 7) != 0 || sscanf(head + 9, "%3d", &code) != 1 ||
        code < 400)
        return;
    n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n",
                 code == 413 ? "request body too large" :
                 code == 501 ? "method not implemented" : "bad request");
    *strchr(head, '\r') = '\0';
    /* Our own additions call us again: nothing ends with page_end then. */
    evbuffer_drain(buf, len);
    evbuffer_add_printf(buf, "%s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        "Content-Length: %d\r\n\r\n%s", head, n, body);
}

/* Each admin connection's bufferevent, with a read high-water mark: evhttp
 * parses one request at a time but would otherwise keep reading whatever a
 * client pipelines behind it, without bound, while the answer waits for a
 * client that does not read. With the mark, reading stops and TCP pushes
 * back on the client. */
static struct bufferevent *
lb_admin_bevcb(struct event_base *base, void *arg)
{
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

    if (bev != NULL) {
        bufferevent_setwatermark(bev, EV_READ, 0, LB_ADMIN_MAX_HEADERS * 2);
        evbuffer_add_cb(bufferevent_get_output(bev), lb_admin_on_output, bev);
    }
    return bev;
}

static void
lb_admin_on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct lb_admin *a = arg;

    event_base_loopbreak(a->base);
}

static void *
lb_admin_main(void *arg)
{
    struct lb_admin *a = arg;

    pthread_setname_np(pthread_self(), "lb-admin");
    event_base_loop(a->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static bool
lb_admin_is_loopback(const struct conf_addr *addr)
{
    if (addr->ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&addr->ss;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->ss;
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    return false;
}

int
lb_admin_start(struct lb_daemon *d, char *err, size_t errlen)
{
    const struct conf_admin *ac = &d->gen->conf->admin;
    struct lb_admin *a = calloc(1, sizeof(*a));
    char lerr[128];
    int fd;

    if (a == NULL) {
        snprintf(err, errlen, "admin: out of memory");
        return -1;
    }
    d->admin = a;
    a->d = d;
    a->base = event_base_new();
    a->http = a->base != NULL ? evhttp_new(a->base) : NULL;
    a->stop_ev = a->base != NULL ? event_new(a->base, -1, 0, lb_admin_on_stop, a) : NULL;
    if (a->http == NULL || a->stop_ev == NULL) {
        snprintf(err, errlen, "admin: evhttp_new failed");
        return -1;
    }
    evhttp_set_max_headers_size(a->http, LB_ADMIN_MAX_HEADERS);
    evhttp_set_max_body_size(a->http, LB_ADMIN_MAX_BODY);
    evhttp_set_timeout(a->http, LB_ADMIN_TIMEOUT_S);
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS |
                                            EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT);
    evhttp_set_gencb(a->http, lb_admin_on_request, a);
    evhttp_set_bevcb(a->http, lb_admin_bevcb, a);
    /* No SO_REUSEPORT here: a second lb on the same admin port must fail,
     * not share it. */
    fd = lb_net_listen((const struct sockaddr *)&ac->listen.ss, ac->listen.len, false,
                       lerr, sizeof(lerr));
    if (fd < 0 || evhttp_accept_socket(a->http, fd) == -1) {
        snprintf(err, errlen, "admin: listen on %s: %s", ac->listen.text,
                 fd < 0 ? lerr : "evhttp_accept_socket failed");
        return -1;
    }
    if (!lb_admin_is_loopback(&ac->listen) && ac->token[0] == '\0')
        lb_log(CONF_LOG_WARN, "admin_exposed",
               "addr=%s detail=\"admin port on a non-loopback address without a token: anyone who reaches it can disable servers\"",
               ac->listen.text);
    if (pthread_create(&a->thread, NULL, lb_admin_main, a) != 0) {
        snprintf(err, errlen, "admin: cannot start its thread");
        return -1;
    }
    a->is_running = true;
    lb_log(CONF_LOG_INFO, "admin_listen", "addr=%s auth=%s", ac->listen.text,
           ac->token[0] ? "token" : "none");
    return 0;
}

void
lb_admin_stop(struct lb_daemon *d)
{
    struct lb_admin *a = d->admin;

    if (a == NULL)
        return;
    if (a->is_running) {
        /* Through an event, not event_base_loopbreak(): a loop that has not
         * started yet clears the break flag when it starts. */
        event_active(a->stop_ev, EV_READ, 0);
        pthread_join(a->thread, NULL);
    }
    if (a->stop_ev != NULL)
        event_free(a->stop_ev);
    if (a->http != NULL)
        evhttp_free(a->http);
    if (a->base != NULL)
        event_base_free(a->base);
    free(a);
    d->admin = NULL;
}
