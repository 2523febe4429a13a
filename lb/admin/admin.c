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
 *   POST /pools/{pool}/servers, DELETE /pools/{pool}/servers/{server},
 *   POST /pools/{pool}/servers/{server}/weight: the pool's members
 *   POST /reload           the same as SIGHUP, answered with its outcome
 *
 * What a request may do is decided by lb_admin_request_check
 * (admin_request.c) from the bytes the client sent, which this file keeps
 * for it: evhttp only frames the requests and writes the answers.
 *
 * This thread decides nothing and writes no server state: operator
 * actions, weights, members, heartbeats and reloads are orders it posts to
 * main, which decides and posts the answer back (admin_int.h,
 * admin_order.c); the answer is sent from that callback, so no request
 * waits on this loop, not even for a reload. State is copied under
 * daemon->state_lock for the documents, which are written without it;
 * counters written by the workers are atomics read without a lock.
 *
 * Bad clients are bounded: evhttp's header and body sizes, a deadline for
 * each complete request, at most LB_ADMIN_MAX_CONNS connections (the
 * descriptors main.c keeps for this port: the data path never lends them),
 * and accepts that pause when the process runs out of descriptors.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
/* Embedded events: a connection's bookkeeping is one allocation. */
#include <event2/event_struct.h>
#include <event2/http.h>
/* For req->major, minor, type and flags, in lb_admin_send_refusal only:
 * libevent 2.1 has no accessor for them. */
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "admin.h"
#include "admin_int.h"
#include "admin_request.h"
#include "daemon.h"
#include "handover.h"
#include "reload.h"
#include "state.h"
#include "tier.h"

/* evhttp's inactivity timeout, in seconds: bounds the writing of an answer
 * to a client that does not read. */
#define LB_ADMIN_TIMEOUT_S 10
/* From connect, or from the end of the last answer, to a complete request:
 * not an inactivity timer, so one byte every few seconds cannot hold a
 * connection (slowloris). */
#define LB_ADMIN_REQUEST_DEADLINE_MS 10000
/* Read high-water mark of a connection: evhttp parses one request at a
 * time but would otherwise keep reading whatever a client pipelines behind
 * it, without bound, while the answer waits for a client that does not
 * read. With the mark, reading stops and TCP pushes back on the client. */
#define LB_ADMIN_READ_MAX (LB_ADMIN_MAX_HEADERS * 2)
/* Bytes kept of a request that is not handed over yet: its head (at most
 * LB_ADMIN_MAX_HEADERS of text, plus a line end per line), its body, and
 * what is pipelined behind it up to the read mark. */
#define LB_ADMIN_KEEP_MAX (LB_ADMIN_MAX_HEADERS * 2 + LB_ADMIN_MAX_BODY + LB_ADMIN_READ_MAX + 4096)
/* After EMFILE/ENFILE, how long accepts pause (as the workers do). */
#define LB_ADMIN_ACCEPT_PAUSE_MS 100
/* At stop, how long the answers still being written may take to leave
 * (a client that does not read is not waited for longer), and how often
 * that is looked at. */
#define LB_ADMIN_STOP_FLUSH_MS 1000
#define LB_ADMIN_STOP_POLL_MS 10

/* One admin connection, from evhttp's bufferevent callback to evhttp's
 * close callback. Admin thread only. */
struct lb_admin_conn {
    struct lb_admin *a;
    struct lb_admin_conn *prev, *next;  /* a->conns, oldest first */
    struct bufferevent *bev;
    struct evhttp_connection *evcon;    /* NULL until adopted */
    /* Every byte read, from the first byte of the request evhttp reads
     * now: libevent 2.1 gives handlers a request already parsed, and
     * lb_admin_request_check needs it as sent. */
    struct evbuffer *kept;
    struct evbuffer_cb_entry *on_input, *on_output;
    uint64_t received;                  /* bytes read, in all */
    uint64_t handed;                    /* of which handed to requests */
    uint64_t waiting_since_ms;          /* for a request; 0 while answering */
    bool is_overflow;                   /* kept more than LB_ADMIN_KEEP_MAX */
    bool is_refused;                    /* over the cap: close when adopted */
    bool is_resume_on_adopt;            /* accepts paused until adopted */
    struct event timer;                 /* adoption, then the deadline */
};

struct lb_admin {
    struct lb_daemon *d;
    pthread_t thread;
    bool is_running;
    struct event_base *base;
    struct evhttp *http;
    struct evconnlistener *listener;    /* NULL once unlistened */
    struct evhttp_bound_socket *bound;
    struct event *stop_ev;              /* ends the loop once the answers
                                           are out (lb_admin_on_stop) */
    struct event *unlisten_ev;          /* lb_admin_unlisten */
    struct lb_admin_conn *conns, *conns_tail;
    size_t nconns;
    struct lb_mailbox *orders;          /* struct lb_admin_order, to main */
    struct lb_mailbox *answers;         /* struct lb_admin_answer, from main */
    struct lb_admin_wait *waits;        /* requests main has not answered */
    bool is_full;                       /* accepts paused: every connection
                                           is being answered */
    /* accepts paused after an accept error; ours, not event_base_once's,
     * so that unlisten and stop can cancel it before the listener goes */
    struct event accept_retry_ev;
    bool is_retry_assigned;             /* accept_retry_ev assigned */
    bool is_stopping;                   /* main answers nothing any more */
    uint64_t stop_deadline_ms;          /* for the answers to leave */
};

extern const char lb_admin_dashboard_html[];    /* admin_dashboard.c, generated */

static void lb_admin_conn_arm(struct lb_admin_conn *c, uint64_t now);
static void lb_admin_conn_adopt(struct lb_admin_conn *c);
static void lb_admin_begin_stop(struct lb_admin *a);

/* ------------------------------------------------------------- answers */

/* Every answer carries its length: libevent 2.1 sends none after a HEAD
 * (and would send the body) nor after a CONNECT. */
static void
lb_admin_reply(struct evhttp_request *req, int code, const char *reason,
               const char *type, struct evbuffer *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char len[24];

    snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_add_header(h, "Content-Length", len);
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD)
        evbuffer_drain(body, evbuffer_get_length(body));
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
    lb_admin_error_body(b, message);
    lb_admin_reply(req, code, reason, "application/json", b);
    evbuffer_free(b);
}

static void
lb_admin_send_refusal(struct evhttp_request *req, const struct lb_admin_verdict *v)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    if (v->allow != NULL)
        evhttp_add_header(h, "Allow", v->allow);
    if (v->is_auth_challenge)
        evhttp_add_header(h, "WWW-Authenticate", "Bearer realm=\"lb\"");
    if (v->must_close) {
        /* libevent keeps the version in chars and would answer
         * "HTTP/1.2147483647" with "HTTP/1.-1": answer 1.1, the version of
         * this answer. */
        if (req->major != 1 || (req->minor != 0 && req->minor != 1)) {
            req->major = 1;
            req->minor = 1;
        }
        /* After a CONNECT it expects a tunnel and ignores "Connection:
         * close" (and would read on); for an absolute target it takes a
         * proxy request and drops the header: answer as to any other. */
        if (req->type == EVHTTP_REQ_CONNECT)
            req->type = EVHTTP_REQ_GET;
        req->flags &= ~EVHTTP_PROXY_REQUEST;
        evhttp_add_header(h, "Connection", "close");
    }
    lb_admin_error(req, v->status, v->reason, v->error);
}

/* GET /pools/P/servers/S and GET /pools/P: as /stats shows them. */
static void
lb_admin_get_one(struct lb_admin *a, struct evhttp_request *req, const struct lb_admin_verdict *v)
{
    struct lb_server_view *view = v->route == LB_ADMIN_ROUTE_SERVER ? lb_admin_view_new() : NULL;
    struct evbuffer *b = evbuffer_new();
    struct lb_server *srv = NULL;
    struct lb_gen *gen = NULL;
    bool pool_found = false;
    int rc = -1;

    if (b != NULL && v->route == LB_ADMIN_ROUTE_POOL) {
        rc = lb_admin_pool_json(a->d, v->pool, b);
    } else if (b != NULL && view != NULL) {
        pthread_mutex_lock(&a->d->state_lock);
        if ((srv = lb_admin_find_server(a->d, v->pool, v->server, &pool_found)) != NULL) {
            lb_admin_view_take(srv, view);
            gen = a->d->gen;
            lb_gen_ref(gen);
        }
        pthread_mutex_unlock(&a->d->state_lock);
        rc = srv != NULL ? 0 : 1;
        if (srv != NULL) {
            lb_admin_server_json(a->d, view, b);
            evbuffer_add(b, "\n", 1);
            lb_gen_unref(gen);
        }
    }
    if (rc == 0)
        lb_admin_reply(req, HTTP_OK, "OK", "application/json", b);
    else if (rc == 1)
        lb_admin_error(req, HTTP_NOTFOUND, "Not Found",
                       pool_found ? "no such server in this pool" : "no such pool");
    else
        lb_admin_error(req, HTTP_INTERNAL, "Internal Server Error", "out of memory");
    free(view);
    if (b != NULL)
        evbuffer_free(b);
}

/* ------------------------------------------------------------- orders */

/* A request waiting for main's answer to its order. Admin thread only:
 * main hands the pointer back in the answer and never reads it. */
struct lb_admin_wait {
    struct evhttp_request *req;
    struct lb_admin_wait *prev, *next;  /* a->waits */
};

static void
lb_admin_wait_unlink(struct lb_admin *a, struct lb_admin_wait *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        a->waits = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
}

/* Hands the order to main, which decides, and answers req from the
 * answer's callback (lb_admin_on_answers). The admin thread goes back to
 * its loop: nothing here waits for main, nor for a reload. */
static void
lb_admin_order(struct lb_admin *a, struct evhttp_request *req, struct lb_admin_order *o)
{
    struct lb_admin_wait *w;

    if (a->is_stopping) {               /* main's loop has ended */
        lb_admin_error(req, HTTP_SERVUNAVAIL, "Service Unavailable", "lb is stopping");
        return;
    }
    if ((w = calloc(1, sizeof(*w))) == NULL) {
        lb_admin_error(req, HTTP_INTERNAL, "Internal Server Error", "out of memory");
        return;
    }
    w->req = req;
    w->next = a->waits;
    if (a->waits != NULL)
        a->waits->prev = w;
    a->waits = w;
    o->wait = w;
    if (lb_mailbox_post(a->orders, o) == -1) {
        lb_admin_wait_unlink(a, w);
        free(w);
        lb_admin_error(req, HTTP_INTERNAL, "Internal Server Error", "out of memory");
    }
}

/* The order of verdict v, with its names. */
static struct lb_admin_order *
lb_admin_order_of(struct lb_admin_order *o, enum lb_admin_order_kind kind,
                  const struct lb_admin_verdict *v)
{
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    if (v != NULL) {
        snprintf(o->pool, sizeof(o->pool), "%s", v->pool);
        snprintf(o->server, sizeof(o->server), "%s", v->server);
    }
    return o;
}

/* POST /pools/P/servers/S/{enable|drain|disable}: 200 with the server. */
static void
lb_admin_action(struct lb_admin *a, struct evhttp_request *req,
                const struct lb_admin_verdict *v)
{
    /* indexed by enum lb_admin_action */
    static const enum bal_admin admins[] = { BAL_ADMIN_NONE, BAL_ADMIN_DRAIN, BAL_ADMIN_DISABLE };
    struct lb_admin_order o;

    lb_admin_order_of(&o, LB_ADMIN_ORDER_ACTION, v)->admin = admins[v->action];
    lb_admin_order(a, req, &o);
}

/* POST /pools/P/servers: 201 once the members reload that adds it ends. */
static void
lb_admin_server_add(struct lb_admin *a, struct evhttp_request *req,
                    const struct lb_admin_verdict *v)
{
    struct lb_admin_order o;

    lb_admin_order_of(&o, LB_ADMIN_ORDER_ADD, v);
    snprintf(o.server_line, sizeof(o.server_line), "%s", v->server_line);
    o.is_ephemeral = v->is_ephemeral;
    lb_admin_order(a, req, &o);
}

/* DELETE /pools/P/servers/S: answered once its members reload ends. */
static void
lb_admin_server_delete(struct lb_admin *a, struct evhttp_request *req,
                       const struct lb_admin_verdict *v)
{
    struct lb_admin_order o;

    lb_admin_order(a, req, lb_admin_order_of(&o, LB_ADMIN_ORDER_DELETE, v));
}

/* POST /pools/P/servers/S/weight {"weight":N}. */
static void
lb_admin_server_weight(struct lb_admin *a, struct evhttp_request *req,
                       const struct lb_admin_verdict *v)
{
    struct lb_admin_order o;

    lb_admin_order_of(&o, LB_ADMIN_ORDER_WEIGHT, v)->weight = v->weight;
    lb_admin_order(a, req, &o);
}

/* POST /pools/P/servers/S/heartbeat. */
static void
lb_admin_heartbeat(struct lb_admin *a, struct evhttp_request *req,
                   const struct lb_admin_verdict *v)
{
    /* indexed by enum lb_admin_beat */
    static const enum bal_beat beats[] = { BAL_BEAT_PASS, BAL_BEAT_WARN, BAL_BEAT_FAIL };
    struct lb_admin_order o;

    lb_admin_order_of(&o, LB_ADMIN_ORDER_HEARTBEAT, v)->beat = beats[v->beat];
    snprintf(o.note, sizeof(o.note), "%s", v->note);
    snprintf(o.server_line, sizeof(o.server_line), "%s", v->server_line);
    o.is_ephemeral = v->is_ephemeral;
    lb_admin_order(a, req, &o);
}

/* The same as SIGHUP, answered with its outcome once it ends. */
static void
lb_admin_reload(struct lb_admin *a, struct evhttp_request *req)
{
    struct lb_admin_order o;

    lb_admin_order(a, req, lb_admin_order_of(&o, LB_ADMIN_ORDER_RELOAD, NULL));
}

/* Main's answers. A client that closed meanwhile is no matter: libevent
 * 2.1 stops reading a connection while its request is being handled, so
 * it learns of the close only when the answer is written; it then frees
 * the connection and the request with it (the close callback frees our
 * lb_admin_conn; lb_admin_on_complete, which uses it, is not called). A
 * request evhttp has detached from its connection (an EOF seen before the
 * answer: evhttp_connection_incoming_fail) is freed by evhttp_send_reply.
 * Nothing here touches the connection. */
static void
lb_admin_on_answers(void *msgs, size_t n, void *arg)
{
    struct lb_admin *a = arg;
    const struct lb_admin_answer *ans = msgs;

    for (size_t i = 0; i < n; i++) {
        struct evhttp_request *req;

        if (ans[i].wait == NULL) {      /* lb_admin_stop's mark: the last */
            lb_admin_begin_stop(a);
            continue;
        }
        req = ans[i].wait->req;
        lb_admin_wait_unlink(a, ans[i].wait);
        free(ans[i].wait);
        if (ans[i].body == NULL) {
            lb_admin_error(req, HTTP_INTERNAL, "Internal Server Error", "out of memory");
            continue;
        }
        lb_admin_reply(req, ans[i].status, ans[i].reason, ans[i].type, ans[i].body);
        evbuffer_free(ans[i].body);
    }
}

static void
lb_admin_drop_answers(void *msgs, size_t n, void *arg)
{
    const struct lb_admin_answer *ans = msgs;

    for (size_t i = 0; i < n; i++) {
        if (ans[i].body != NULL)
            evbuffer_free(ans[i].body);
    }
}

void
lb_admin_answer_post(struct lb_daemon *d, const struct lb_admin_answer *ans)
{
    if (d->admin != NULL && d->admin->answers != NULL && lb_mailbox_post(d->admin->answers, ans) == 0)
        return;
    /* stopped (its requests are gone with it), or out of memory: the
     * request stays unanswered until its connection goes */
    if (d->admin != NULL)
        lb_log(CONF_LOG_ERROR, "admin_answer_lost", "error=\"out of memory\"");
    if (ans->body != NULL)
        evbuffer_free(ans->body);
}

static void
lb_admin_get(struct lb_admin *a, struct evhttp_request *req, enum lb_admin_route route)
{
    struct evbuffer *b = evbuffer_new();
    int rc = 0;

    if (b == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    switch (route) {
    case LB_ADMIN_ROUTE_DASHBOARD:
        evbuffer_add_reference(b, lb_admin_dashboard_html, strlen(lb_admin_dashboard_html),
                               NULL, NULL);
        lb_admin_reply(req, HTTP_OK, "OK", "text/html; charset=utf-8", b);
        break;
    case LB_ADMIN_ROUTE_STATS:
        if ((rc = lb_admin_stats_json(a->d, b)) == 0)
            lb_admin_reply(req, HTTP_OK, "OK", "application/json", b);
        break;
    case LB_ADMIN_ROUTE_METRICS:
        if ((rc = lb_admin_metrics(a->d, b)) == 0)
            lb_admin_reply(req, HTTP_OK, "OK", "text/plain; version=0.0.4; charset=utf-8", b);
        break;
    default:
        evbuffer_add(b, "ok\n", 3);
        lb_admin_reply(req, HTTP_OK, "OK", "text/plain; charset=utf-8", b);
        break;
    }
    if (rc == -1)
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
    evbuffer_free(b);
}

/* GET /ready: what a routing layer in front asks (a BGP speaker's health
 * check, keepalived's vrrp_script, a Kubernetes readiness probe). 200
 * "ready", or 503 with the reasons; the verdict is the tier's
 * (tier/tier.c). */
struct lb_admin_reasons {
    struct evbuffer *b;
    size_t n;
};

static void
lb_admin_ready_reason(void *arg, const char *reason)
{
    struct lb_admin_reasons *r = arg;

    if (r->n++ > 0)
        LB_ADD_LIT(r->b, ",");
    lb_json_str(r->b, reason);
}

static void
lb_admin_ready(struct lb_admin *a, struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    struct lb_admin_reasons r = { .b = b };
    bool is_ready;

    if (b == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    LB_ADD_LIT(b, "{\"ready\":false,\"reasons\":[");
    is_ready = lb_tier_ready(a->d, lb_admin_ready_reason, &r);
    if (is_ready) {
        evbuffer_drain(b, evbuffer_get_length(b));
        LB_ADD_LIT(b, "ready\n");
        lb_admin_reply(req, HTTP_OK, "OK", "text/plain; charset=utf-8", b);
    } else {
        LB_ADD_LIT(b, "]}\n");
        lb_admin_reply(req, HTTP_SERVUNAVAIL, "Service Unavailable", "application/json", b);
    }
    evbuffer_free(b);
}

/* ------------------------------------------------------------ requests */

static struct lb_admin_conn *
lb_admin_conn_of(struct lb_admin *a, struct evhttp_request *req)
{
    struct bufferevent *bev =
        evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));

    for (struct lb_admin_conn *c = a->conns; c != NULL; c = c->next) {
        if (c->bev == bev)
            return c;
    }
    return NULL;
}

/* Decides about req from its own bytes: what evhttp consumed of the
 * connection since the previous request. */
static void
lb_admin_check(struct lb_admin *a, struct lb_admin_conn *c, struct evhttp_request *req,
               struct lb_admin_verdict *v)
{
    uint64_t end = c->received - evbuffer_get_length(bufferevent_get_input(c->bev));
    size_t len = (size_t)(end - c->handed);
    const char *raw = NULL;
    struct lb_gen *gen;

    if (!c->is_overflow && len > 0 && len <= evbuffer_get_length(c->kept))
        raw = (const char *)evbuffer_pullup(c->kept, (ssize_t)len);
    if (raw == NULL) {
        /* more than evhttp's limits let through, or out of memory: refuse
         * rather than guess */
        memset(v, 0, sizeof(*v));
        v->status = 400;
        v->reason = "Bad Request";
        v->error = "request too large";
        v->must_close = true;
        return;
    }
    /* allowed_hosts and the token come from the current generation: a
     * reload may change them, and swaps the generation under this lock. */
    pthread_mutex_lock(&a->d->state_lock);
    gen = a->d->gen;
    lb_gen_ref(gen);
    pthread_mutex_unlock(&a->d->state_lock);
    lb_admin_request_check(&gen->conf->admin, raw, len, v);
    lb_gen_unref(gen);
    evbuffer_drain(c->kept, len);
    c->handed = end;
}

/* Accepts paused because every connection was being answered may go on:
 * one closed, or one waits for a request again (it can be evicted). */
static void
lb_admin_accept_resume(struct lb_admin *a)
{
    if (a->is_full && a->listener != NULL) {
        a->is_full = false;
        /* paused for an accept error too: its retry resumes */
        if (!evtimer_pending(&a->accept_retry_ev, NULL))
            evconnlistener_enable(a->listener);
    }
}

/* The answer is written: the connection waits for its next request. */
static void
lb_admin_on_complete(struct evhttp_request *req, void *arg)
{
    struct lb_admin_conn *c = arg;

    lb_admin_conn_arm(c, lb_mono_ms());
    lb_admin_accept_resume(c->a);
}

/* What answers a route: the verdict holds what the request named (pool,
 * server, action, body), and the handler answers req. */
typedef void lb_admin_handler_pt(struct lb_admin *a, struct evhttp_request *req,
                                 const struct lb_admin_verdict *v);

/* Adapters to that shape for the answers that need less of it. */
static void
lb_admin_handle_refusal(struct lb_admin *a, struct evhttp_request *req,
                        const struct lb_admin_verdict *v)
{
    (void)a;
    lb_admin_send_refusal(req, v);
}

static void
lb_admin_handle_page(struct lb_admin *a, struct evhttp_request *req,
                     const struct lb_admin_verdict *v)
{
    lb_admin_get(a, req, v->route);
}

static void
lb_admin_handle_ready(struct lb_admin *a, struct evhttp_request *req,
                      const struct lb_admin_verdict *v)
{
    (void)v;
    lb_admin_ready(a, req);
}

static void
lb_admin_handle_reload(struct lb_admin *a, struct evhttp_request *req,
                       const struct lb_admin_verdict *v)
{
    (void)v;
    lb_admin_reload(a, req);
}

/* The handler of each route. The routes themselves (method, path, auth,
 * body) are the table in admin_request.c, where the unit test and the
 * fuzz targets decide with them as lb does (why it is not here: see
 * there); the route id joins the two. */
static lb_admin_handler_pt *const lb_admin_handlers[] = {
    [LB_ADMIN_ROUTE_REFUSED] = lb_admin_handle_refusal,
    [LB_ADMIN_ROUTE_DASHBOARD] = lb_admin_handle_page,
    [LB_ADMIN_ROUTE_STATS] = lb_admin_handle_page,
    [LB_ADMIN_ROUTE_METRICS] = lb_admin_handle_page,
    [LB_ADMIN_ROUTE_HEALTHZ] = lb_admin_handle_page,
    [LB_ADMIN_ROUTE_READY] = lb_admin_handle_ready,
    [LB_ADMIN_ROUTE_ACTION] = lb_admin_action,
    [LB_ADMIN_ROUTE_RELOAD] = lb_admin_handle_reload,
    [LB_ADMIN_ROUTE_SERVER_ADD] = lb_admin_server_add,
    [LB_ADMIN_ROUTE_SERVER_DELETE] = lb_admin_server_delete,
    [LB_ADMIN_ROUTE_SERVER_WEIGHT] = lb_admin_server_weight,
    [LB_ADMIN_ROUTE_HEARTBEAT] = lb_admin_heartbeat,
    [LB_ADMIN_ROUTE_POOL] = lb_admin_get_one,
    [LB_ADMIN_ROUTE_SERVER] = lb_admin_get_one,
};
/* A route added last without its handler; one left out before it is a
 * NULL, answered 500 below. */
_Static_assert(sizeof(lb_admin_handlers) / sizeof(lb_admin_handlers[0]) == LB_ADMIN_ROUTE_COUNT,
               "every route has its handler in lb_admin_handlers");

static void
lb_admin_on_request(struct evhttp_request *req, void *arg)
{
    struct lb_admin *a = arg;
    struct lb_admin_conn *c = lb_admin_conn_of(a, req);
    struct lb_admin_verdict v;

    if (c == NULL) {
        /* its bookkeeping could not be allocated: no bytes to decide on */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        lb_admin_error(req, HTTP_SERVUNAVAIL, "Service Unavailable", "out of memory");
        return;
    }
    /* Adopted at accept, before any byte is read; should evhttp ever call
     * sooner, adopt it now (the close callback is needed). */
    if (c->evcon == NULL) {
        c->is_refused = false;
        lb_admin_conn_adopt(c);
    }
    c->waiting_since_ms = 0;            /* no deadline while answering */
    event_del(&c->timer);
    lb_admin_check(a, c, req, &v);
    evhttp_request_set_on_complete_cb(req, lb_admin_on_complete, c);
    if (lb_admin_handlers[v.route] == NULL)
        lb_admin_error(req, HTTP_INTERNAL, "Internal Server Error", "no handler for this route");
    else
        lb_admin_handlers[v.route](a, req, &v);
}

/* Requests that evhttp refuses before any handler sees them (garbage, a
 * header or request line over the limit, a body over the limit, an unknown
 * method) get libevent's own HTML error page; the contract wants every
 * error as JSON, so the page is rewritten in the output buffer, where
 * libevent writes all of it before sending any. */
static void
lb_admin_on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    char in[4096], out[512];
    size_t len = evbuffer_get_length(buf), n;

    if (info->n_added == 0 || len < 40 || len > sizeof(in))
        return;
    evbuffer_copyout(buf, in, len);
    n = lb_admin_error_page_json(in, len, out, sizeof(out));
    if (n == 0)
        return;
    /* Our own addition calls us again: it is not a page then. */
    evbuffer_drain(buf, len);
    evbuffer_add(buf, out, n);
}

/* Keeps a copy of what was read: the socket's bytes are appended to the
 * input buffer, and this runs before evhttp parses (and drains) them. */
static void
lb_admin_on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct lb_admin_conn *c = arg;
    size_t len = evbuffer_get_length(buf), left = info->n_added;
    struct evbuffer_ptr at;
    char chunk[4096];

    c->received += info->n_added;
    if (left == 0 || c->is_overflow)
        return;
    if (evbuffer_get_length(c->kept) + left > LB_ADMIN_KEEP_MAX ||
        evbuffer_ptr_set(buf, &at, len - left, EVBUFFER_PTR_SET) == -1) {
        c->is_overflow = true;          /* the request is refused */
        evbuffer_drain(c->kept, evbuffer_get_length(c->kept));
        return;
    }
    while (left > 0) {
        size_t n = left < sizeof(chunk) ? left : sizeof(chunk);

        if (evbuffer_copyout_from(buf, &at, chunk, n) != (ssize_t)n ||
            evbuffer_add(c->kept, chunk, n) == -1 ||
            evbuffer_ptr_set(buf, &at, n, EVBUFFER_PTR_ADD) == -1) {
            c->is_overflow = true;
            return;
        }
        left -= n;
    }
}

/* --------------------------------------------------------- connections */

/* One line a second of each: a flood of clients repeats them. */
static struct lb_log_limit lb_admin_full_log = LB_LOG_LIMIT(1);
static struct lb_log_limit lb_admin_accept_log = LB_LOG_LIMIT(1);

static void
lb_admin_conn_free(struct lb_admin_conn *c)
{
    struct lb_admin *a = c->a;

    event_del(&c->timer);
    evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->on_input);
    evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->on_output);
    evbuffer_free(c->kept);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        a->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        a->conns_tail = c->prev;
    a->nconns--;
    free(c);
}

static void
lb_admin_on_close(struct evhttp_connection *evcon, void *arg)
{
    struct lb_admin_conn *c = arg;
    struct lb_admin *a = c->a;
    bool is_refused = c->is_refused;

    evhttp_connection_set_closecb(evcon, NULL, NULL);
    lb_admin_conn_free(c);
    if (!is_refused)                    /* a slot is free */
        lb_admin_accept_resume(a);
}

/* The connection waits for a request from now: the deadline runs. */
static void
lb_admin_conn_arm(struct lb_admin_conn *c, uint64_t now)
{
    struct timeval tv = { LB_ADMIN_REQUEST_DEADLINE_MS / 1000,
                          (LB_ADMIN_REQUEST_DEADLINE_MS % 1000) * 1000 };

    c->waiting_since_ms = now;
    event_add(&c->timer, &tv);
}

/* Right after evhttp set the connection up (its bufferevent callback runs
 * before the connection object exists): learn the connection object, to
 * hear of its close and to close it. evhttp passes it as its bufferevent
 * callbacks' argument (libevent 2.1 and 2.2). A connection evhttp already
 * freed has no callbacks left. */
static void
lb_admin_conn_adopt(struct lb_admin_conn *c)
{
    struct bufferevent *bev = c->bev;
    struct lb_admin *a = c->a;
    bufferevent_event_cb eventcb = NULL;
    void *evcon = NULL;

    /* Accept on: the descriptor of the connection this one replaced
     * (make_room) is closed in this same loop pass, before the listener
     * is polled again. */
    if (c->is_resume_on_adopt && !a->is_full && a->listener != NULL)
        evconnlistener_enable(a->listener);
    bufferevent_getcb(bev, NULL, NULL, &eventcb, &evcon);
    if (eventcb == NULL || evcon == NULL) {
        lb_admin_conn_free(c);
        bufferevent_decref(bev);        /* the last reference: closes it */
        return;
    }
    c->evcon = evcon;
    evhttp_connection_set_closecb(c->evcon, lb_admin_on_close, c);
    bufferevent_decref(bev);            /* evhttp's reference remains */
    if (c->is_refused) {
        evhttp_connection_free(c->evcon);
        return;
    }
    /* what is left of the deadline that started at accept */
    {
        uint64_t now = lb_mono_ms(), passed = now - c->waiting_since_ms;
        uint64_t left = passed < LB_ADMIN_REQUEST_DEADLINE_MS ? LB_ADMIN_REQUEST_DEADLINE_MS - passed : 0;
        struct timeval tv = { (time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000 };

        event_add(&c->timer, &tv);
    }
}

static void
lb_admin_conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct lb_admin_conn *c = arg;

    if (c->evcon == NULL)
        lb_admin_conn_adopt(c);
    else
        evhttp_connection_free(c->evcon);   /* deadline: no complete request */
}

/* One connection too many: close the one that has waited longest for its
 * request (nginx reuses idle connections the same way when
 * worker_connections runs out), so that idle or slow clients cannot lock
 * operators out. When every connection is being answered, the newcomer is
 * closed instead and accepts pause until one ends. */
static void
lb_admin_make_room(struct lb_admin *a, struct lb_admin_conn *newcomer)
{
    struct lb_admin_conn *victim = NULL;

    for (struct lb_admin_conn *c = a->conns; c != NULL; c = c->next) {
        if (c != newcomer && !c->is_refused && c->waiting_since_ms != 0 &&
            (victim == NULL || c->waiting_since_ms < victim->waiting_since_ms))
            victim = c;
    }
    lb_log_limited(&lb_admin_full_log, CONF_LOG_WARN, "admin_connections_full",
                   "limit=%d closed=%s", LB_ADMIN_MAX_CONNS,
                   victim != NULL ? "oldest_waiting" : "new");
    /* One at a time: libevent closes a connection's descriptor once the
     * accept callback has returned, and would accept on meanwhile. */
    evconnlistener_disable(a->listener);
    if (victim == NULL) {
        newcomer->is_refused = true;
        a->is_full = true;
        return;
    }
    newcomer->is_resume_on_adopt = true;
    if (victim->evcon != NULL)
        evhttp_connection_free(victim->evcon);
    else
        victim->is_refused = true;      /* accepted in this same callback */
}

/* evhttp's bufferevent for a new connection, with the copy of what it
 * reads and the rewriting of libevent's error pages. */
static struct bufferevent *
lb_admin_bevcb(struct event_base *base, void *arg)
{
    struct lb_admin *a = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    struct lb_admin_conn *c;

    if (bev == NULL)
        return NULL;
    bufferevent_setwatermark(bev, EV_READ, 0, LB_ADMIN_READ_MAX);
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->kept = evbuffer_new()) == NULL ||
        (c->on_input = evbuffer_add_cb(bufferevent_get_input(bev), lb_admin_on_input, c)) == NULL ||
        (c->on_output = evbuffer_add_cb(bufferevent_get_output(bev), lb_admin_on_output, c)) == NULL) {
        /* untracked: its requests are answered 503 (lb_admin_on_request) */
        if (c != NULL && c->on_input != NULL)
            evbuffer_remove_cb_entry(bufferevent_get_input(bev), c->on_input);
        if (c != NULL && c->kept != NULL)
            evbuffer_free(c->kept);
        free(c);
        return bev;
    }
    c->a = a;
    c->bev = bev;
    c->waiting_since_ms = lb_mono_ms();
    /* Held until adopted, so that a connection evhttp frees before that
     * (out of memory) does not leave c pointing at freed memory. */
    bufferevent_incref(bev);
    event_assign(&c->timer, base, -1, 0, lb_admin_conn_on_timer, c);
    event_active(&c->timer, EV_TIMEOUT, 1);
    c->prev = a->conns_tail;
    if (a->conns_tail != NULL)
        a->conns_tail->next = c;
    else
        a->conns = c;
    a->conns_tail = c;
    if (++a->nconns > LB_ADMIN_MAX_CONNS)
        lb_admin_make_room(a, c);
    return bev;
}

/* The pause after an accept error is over; accepts stay paused while
 * every connection is being answered (lb_admin_accept_resume). */
static void
lb_admin_on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    struct lb_admin *a = arg;

    if (a->listener != NULL && !a->is_full)
        evconnlistener_enable(a->listener);
}

/* accept(2) failed for another reason than "try again": out of
 * descriptors or memory. The socket stays readable, so the listener would
 * spin at full CPU; pause it (the workers do the same). */
/* The admin port whose listener is evhttp's: the listener's callbacks get
 * evhttp's argument, not ours. One admin port per process. */
static struct lb_admin *lb_admin_listening;

static void
lb_admin_on_accept_error(struct evconnlistener *lev, void *arg)
{
    struct lb_admin *a = lb_admin_listening;
    struct timeval tv = { 0, LB_ADMIN_ACCEPT_PAUSE_MS * 1000 };
    int err = EVUTIL_SOCKET_ERROR();
    char qbuf[128];

    evconnlistener_disable(lev);
    lb_log_limited(&lb_admin_accept_log, CONF_LOG_WARN, "accept_failed",
                   "listener=admin error=%s pause_ms=%d",
                   lb_log_quote(qbuf, sizeof(qbuf), strerror(err)), LB_ADMIN_ACCEPT_PAUSE_MS);
    evtimer_add(&a->accept_retry_ev, &tv);
}

/* ----------------------------------------------------------- lifecycle */

/* Main has posted its last answer (lb_admin_stop): what still waits gets
 * 503 now, and so does any order asked from here on; accepts end. */
static void
lb_admin_begin_stop(struct lb_admin *a)
{
    if (a->is_stopping)
        return;
    a->is_stopping = true;
    a->stop_deadline_ms = lb_mono_ms() + LB_ADMIN_STOP_FLUSH_MS;
    if (a->listener != NULL)
        evconnlistener_disable(a->listener);
    if (a->is_retry_assigned)
        evtimer_del(&a->accept_retry_ev);
    while (a->waits != NULL) {
        struct lb_admin_wait *w = a->waits;
        struct evhttp_request *req = w->req;

        lb_admin_wait_unlink(a, w);
        free(w);
        lb_admin_error(req, HTTP_SERVUNAVAIL, "Service Unavailable", "lb is stopping");
    }
    event_active(a->stop_ev, EV_READ, 0);
}

static bool
lb_admin_is_flushed(const struct lb_admin *a)
{
    for (const struct lb_admin_conn *c = a->conns; c != NULL; c = c->next) {
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
            return false;
    }
    return true;
}

/* The loop ends once every answer has left, or at the deadline. */
static void
lb_admin_on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct lb_admin *a = arg;
    struct timeval tv = { 0, LB_ADMIN_STOP_POLL_MS * 1000 };

    lb_admin_begin_stop(a);             /* the mark could not be posted */
    if (lb_admin_is_flushed(a) || lb_mono_ms() >= a->stop_deadline_ms)
        event_base_loopbreak(a->base);
    else
        event_add(a->stop_ev, &tv);
}

/* The admin socket now belongs to the process that took over: this one
 * stops accepting on it (its copy is closed; the socket, and the
 * connections in its queue, live on in the new process). */
static void
lb_admin_on_unlisten(evutil_socket_t fd, short what, void *arg)
{
    struct lb_admin *a = arg;

    if (a->is_retry_assigned)
        evtimer_del(&a->accept_retry_ev);
    if (a->bound != NULL)
        evhttp_del_accept_socket(a->http, a->bound);
    a->bound = NULL;
    a->listener = NULL;
}

int
lb_admin_fd(struct lb_daemon *d)
{
    return d->admin != NULL && d->admin->listener != NULL
               ? evconnlistener_get_fd(d->admin->listener) : -1;
}

void
lb_admin_unlisten(struct lb_daemon *d)
{
    if (d->admin != NULL && d->admin->is_running)
        event_active(d->admin->unlisten_ev, EV_READ, 0);
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
    struct evhttp_bound_socket *bound = NULL;
    char lerr[128];
    int fd;

    if (a == NULL) {
        snprintf(err, errlen, "admin: out of memory");
        return -1;
    }
    d->admin = a;
    a->d = d;
    a->base = lb_base_new(0);
    a->http = a->base != NULL ? evhttp_new(a->base) : NULL;
    a->stop_ev = a->base != NULL ? event_new(a->base, -1, 0, lb_admin_on_stop, a) : NULL;
    a->unlisten_ev = a->base != NULL ? event_new(a->base, -1, 0, lb_admin_on_unlisten, a) : NULL;
    if (a->base != NULL) {
        evtimer_assign(&a->accept_retry_ev, a->base, lb_admin_on_accept_retry, a);
        a->is_retry_assigned = true;
    }
    /* orders on main's loop, answers on this port's */
    a->orders = lb_mailbox_new(d->base, sizeof(struct lb_admin_order), lb_admin_on_orders, d);
    a->answers = a->base != NULL ? lb_mailbox_new(a->base, sizeof(struct lb_admin_answer),
                                                  lb_admin_on_answers, a)
                                 : NULL;
    if (a->http == NULL || a->stop_ev == NULL || a->unlisten_ev == NULL || a->orders == NULL ||
        a->answers == NULL) {
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
     * not share it. The process an upgrade replaces hands its socket over
     * instead. */
    fd = lb_takeover_admin_fd(d, &ac->listen);
    if (fd < 0)
        fd = lb_net_listen((const struct sockaddr *)&ac->listen.ss, ac->listen.len,
                           SOCK_STREAM, false, lerr, sizeof(lerr));
    if (fd >= 0 && (bound = evhttp_accept_socket_with_handle(a->http, fd)) == NULL)
        close(fd);
    if (bound == NULL) {
        snprintf(err, errlen, "admin: listen on %s: %s", ac->listen.text,
                 fd < 0 ? lerr : "evhttp_accept_socket failed");
        return -1;
    }
    a->bound = bound;
    a->listener = evhttp_bound_socket_get_listener(bound);
    lb_admin_listening = a;
    evconnlistener_set_error_cb(a->listener, lb_admin_on_accept_error);
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
        /* Main answers nothing after this mark: behind every answer it
         * posted, it tells the admin thread to answer what still waits and
         * to end once the answers are out. Through the loop, not
         * event_base_loopbreak(): a loop that has not started yet clears
         * the break flag when it starts. */
        struct lb_admin_answer mark = { .wait = NULL };

        if (lb_mailbox_post(a->answers, &mark) == -1)
            event_active(a->stop_ev, EV_READ, 0);
        pthread_join(a->thread, NULL);
    }
    if (a->stop_ev != NULL)
        event_free(a->stop_ev);
    if (a->unlisten_ev != NULL)
        event_free(a->unlisten_ev);
    if (a->is_retry_assigned)
        evtimer_del(&a->accept_retry_ev);
    if (lb_admin_listening == a)
        lb_admin_listening = NULL;
    /* Main's loop has ended: no answer comes any more, and orders not
     * carried out are dropped. A request still waiting is freed with its
     * connection by evhttp_free, or here when evhttp detached it. */
    lb_mailbox_free(a->answers, lb_admin_drop_answers, NULL);
    lb_mailbox_free(a->orders, NULL, NULL);
    a->answers = a->orders = NULL;
    for (struct lb_admin_wait *w = a->waits, *next; w != NULL; w = next) {
        next = w->next;
        if (evhttp_request_get_connection(w->req) == NULL)
            evhttp_request_free(w->req);
        free(w);
    }
    a->waits = NULL;
    /* evhttp_free frees the listener first, then each connection (whose
     * close callback must not touch the listener any more). Connections
     * not adopted yet hold a reference of ours on their bufferevent. */
    a->listener = NULL;
    for (struct lb_admin_conn *c = a->conns, *next; c != NULL; c = next) {
        struct bufferevent *bev = c->bev;

        next = c->next;
        if (c->evcon == NULL) {
            lb_admin_conn_free(c);
            bufferevent_decref(bev);
        }
    }
    if (a->http != NULL)
        evhttp_free(a->http);
    if (a->base != NULL)
        event_base_free(a->base);
    free(a);
    d->admin = NULL;
}
