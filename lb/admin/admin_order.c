/*
 * admin_order.c - the admin port's orders, carried out on main: main is the
 * one thread that decides (operator actions, weights, members, heartbeats,
 * reloads), under state_lock so that the admin thread's copies for /stats
 * and /metrics are consistent, and answers each order through the admin
 * thread's mailbox (admin_int.h). An order that needs a members reload or
 * a reload is answered when that reload ends (warm-up included); main's
 * loop goes on meanwhile, and so does the admin thread's.
 *
 * The answers' status codes and bodies are the admin API's contract
 * (tests/integration/test_admin_*.py).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "admin.h"
#include "admin_int.h"
#include "conf_value.h"                 /* conf_parse_server: a server line */
#include "daemon.h"
#include "reload.h"
#include "state.h"

struct lb_server *
lb_admin_find_server(struct lb_daemon *d, const char *pool, const char *server,
                     bool *pool_found)
{
    struct lb_gen *g = d->gen;
    struct lb_server *srv = lb_gen_find_server(g, pool, server);

    *pool_found = srv != NULL;
    for (size_t i = 0; i < g->conf->npools && !*pool_found; i++)
        *pool_found = strcmp(g->pools[i].conf->name, pool) == 0;
    return srv;
}

void
lb_admin_error_body(struct evbuffer *b, const char *message)
{
    /* escaped: a config parser's message quotes what the client sent */
    evbuffer_add(b, "{\"error\":", 9);
    lb_json_str(b, message);
    evbuffer_add(b, "}\n", 2);
}

static void
lb_order_answer(struct lb_daemon *d, struct lb_admin_wait *w, int status, const char *reason,
                struct evbuffer *body)
{
    const struct lb_admin_answer a = { .wait = w, .status = status, .reason = reason,
                                       .type = "application/json", .body = body };

    lb_admin_answer_post(d, &a);
}

static void
lb_order_error(struct lb_daemon *d, struct lb_admin_wait *w, int status, const char *reason,
               const char *message)
{
    struct evbuffer *b = evbuffer_new();

    if (b != NULL)
        lb_admin_error_body(b, message);
    lb_order_answer(d, w, status, reason, b);
}

static void
lb_order_not_found(struct lb_daemon *d, struct lb_admin_wait *w, bool pool_found)
{
    lb_order_error(d, w, 404, "Not Found",
                   pool_found ? "no such server in this pool" : "no such pool");
}

/* The JSON of server `name` of pool `pool` in the current generation (after
 * a members reload), or 500 with why it is not there. */
static void
lb_order_answer_server(struct lb_daemon *d, struct lb_admin_wait *w, int status,
                       const char *reason, const char *pool, const char *name)
{
    struct lb_server_view *view = lb_admin_view_new();
    struct evbuffer *b = evbuffer_new();
    struct lb_server *srv = NULL;
    bool pool_found;

    if (view != NULL && b != NULL) {
        /* main is the generation's only writer: the lock is for the
         * server's state, which the view copies */
        pthread_mutex_lock(&d->state_lock);
        if ((srv = lb_admin_find_server(d, pool, name, &pool_found)) != NULL)
            lb_admin_view_take(srv, view);
        pthread_mutex_unlock(&d->state_lock);
    }
    if (srv != NULL) {
        lb_admin_server_json(d, view, b);
        evbuffer_add(b, "\n", 1);
        lb_order_answer(d, w, status, reason, b);
    } else {
        if (b != NULL)
            evbuffer_free(b);
        lb_order_error(d, w, 500, "Internal Server Error",
                       view == NULL || b == NULL ? "out of memory"
                                                 : "the server is not in the pool after the change");
    }
    free(view);
}

/* POST /pools/P/servers/S/{enable|drain|disable}: 200 with the server. */
static void
lb_order_action(struct lb_daemon *d, const struct lb_admin_order *o)
{
    struct lb_server *srv;
    bool pool_found;

    pthread_mutex_lock(&d->state_lock);
    srv = lb_admin_find_server(d, o->pool, o->server, &pool_found);
    if (srv != NULL)
        lb_server_set_admin(d, srv, o->admin);
    pthread_mutex_unlock(&d->state_lock);
    if (srv == NULL)
        lb_order_not_found(d, o->wait, pool_found);
    else
        lb_order_answer_server(d, o->wait, 200, "OK", o->pool, o->server);
}

/* ------------------------------------------- orders that need a reload */

/* What an order keeps until its members reload ends. */
struct lb_order_pending {
    struct lb_admin_wait *wait;
    enum lb_admin_order_kind kind;
    char pool[CONF_NAME_MAX + 1];
    char server[CONF_NAME_MAX + 1];
    uint32_t active;                    /* DELETE: its answer's figures */
    uint64_t drain_ms;
};

static void
lb_order_on_members_reload(struct lb_daemon *d, void *arg, int rc, const char *msg)
{
    struct lb_order_pending *p = arg;
    struct evbuffer *b;

    if (rc != 0) {
        lb_order_error(d, p->wait, 500, "Internal Server Error", msg);
    } else if (p->kind == LB_ADMIN_ORDER_ADD || p->kind == LB_ADMIN_ORDER_HEARTBEAT) {
        lb_order_answer_server(d, p->wait, 201, "Created", p->pool, p->server);
    } else if (p->kind == LB_ADMIN_ORDER_WEIGHT) {
        lb_order_answer_server(d, p->wait, 200, "OK", p->pool, p->server);
    } else {
        if ((b = evbuffer_new()) != NULL) {
            evbuffer_add(b, "{\"deleted\":", 11);
            lb_json_str(b, p->server);
            evbuffer_add_printf(b, ",\"active_connections\":%u,\"drain_timeout_ms\":%llu}\n",
                                p->active, (unsigned long long)p->drain_ms);
        }
        lb_order_answer(d, p->wait, 200, "OK", b);
    }
    free(p);
}

/* Asks for the members reload that applies o's change; answered when it
 * ends (lb_order_on_members_reload). */
static void
lb_order_members_reload(struct lb_daemon *d, const struct lb_admin_order *o, const char *name,
                        uint32_t active, uint64_t drain_ms)
{
    struct lb_order_pending *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        lb_order_error(d, o->wait, 500, "Internal Server Error", "out of memory");
        return;
    }
    *p = (struct lb_order_pending){ .wait = o->wait, .kind = o->kind, .active = active,
                                    .drain_ms = drain_ms };
    snprintf(p->pool, sizeof(p->pool), "%s", o->pool);
    snprintf(p->server, sizeof(p->server), "%s", name);
    lb_reload_members_request(d, lb_order_on_members_reload, p);
}

/* The member a server line gives ("NAME ADDRESS [options]", as the file
 * writes it): its name, address, weight and max_connections. -1 with
 * conf_parse_server's message in err. */
static int
lb_order_member(const char *line, struct lb_member *mb, char *err, size_t errlen)
{
    struct conf_server cs = { 0 };
    char name[CONF_NAME_MAX + 1];

    if (conf_parse_server(line, name, &cs, err, errlen) != 0)
        return -1;
    snprintf(mb->name, sizeof(mb->name), "%s", name);
    snprintf(mb->address, sizeof(mb->address), "%s", cs.addr.text);
    free(cs.addr.text);
    mb->weight = cs.weight;
    mb->max_connections = cs.max_connections;
    return 0;
}

/* POST /pools/P/servers: the body as a server line of the file would be
 * (its messages), a name and an address not in the pool yet (409). The
 * server is probed before it joins rotation, as after a reload. 201. An
 * ephemeral one needs the pool's heartbeat_ttl (409): its heartbeats are
 * what keeps it. A heartbeat with an address for a server the pool does
 * not have comes here too (lb_order_heartbeat): one on its way already
 * (a second heartbeat before the first's reload ended) is answered with
 * that reload. */
static void
lb_order_add(struct lb_daemon *d, const struct lb_admin_order *o)
{
    struct lb_member mb = { .is_ephemeral = o->is_ephemeral };
    char err[512];
    const struct lb_pool *pool = NULL;
    const struct lb_member *pending;
    const char *conflict = NULL;
    int rc = 0;

    if (lb_order_member(o->server_line, &mb, err, sizeof(err)) != 0) {
        lb_order_error(d, o->wait, 400, "Bad Request", err);
        return;
    }
    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < d->gen->conf->npools && pool == NULL; i++)
        pool = strcmp(d->gen->pools[i].conf->name, o->pool) == 0 ? &d->gen->pools[i] : NULL;
    if (pool != NULL && mb.is_ephemeral && pool->conf->heartbeat_ttl_ms == 0) {
        rc = 2;
    } else if (pool != NULL && o->kind == LB_ADMIN_ORDER_HEARTBEAT &&
               (pending = lb_members_api_find(d, o->pool, mb.name)) != NULL &&
               pending->is_ephemeral && strcmp(pending->address, mb.address) == 0) {
        /* Registered from this address and not in the pool: its reload is
         * on the way, or it lost its name or address to a server of the
         * file since. Judged again, with its own options (a heartbeat's
         * line has no max_connections). */
        struct lb_member kept = *pending;

        (void)lb_members_api_remove(d, o->pool, mb.name);
        rc = lb_members_api_add(d, pool->conf, &kept, &conflict);
    } else if (pool != NULL) {
        /* one registered from another address: 409, being added */
        rc = lb_members_api_add(d, pool->conf, &mb, &conflict);
    }
    pthread_mutex_unlock(&d->state_lock);
    if (pool == NULL)
        lb_order_error(d, o->wait, 404, "Not Found", "no such pool");
    else if (rc == 2)
        lb_order_error(d, o->wait, 409, "Conflict",
                       "ephemeral servers need the pool's heartbeat_ttl");
    else if (rc == 1)
        lb_order_error(d, o->wait, 409, "Conflict", conflict);
    else if (rc != 0)
        lb_order_error(d, o->wait, 500, "Internal Server Error", "out of memory");
    else
        lb_order_members_reload(d, o, mb.name, 0, 0);
}

/* DELETE /pools/P/servers/S: a server the API added leaves rotation at
 * once, drains with drain_timeout, then goes; one of the file or of DNS
 * is theirs to remove (409). */
static void
lb_order_delete(struct lb_daemon *d, const struct lb_admin_order *o)
{
    struct lb_server *srv;
    const char *conflict = NULL;
    bool pool_found;
    uint32_t active = 0;
    uint64_t drain_ms = 0;

    pthread_mutex_lock(&d->state_lock);
    srv = lb_admin_find_server(d, o->pool, o->server, &pool_found);
    if (srv != NULL && srv->conf->source == CONF_SOURCE_CONFIG)
        conflict = "the server comes from the config file: remove its line and reload";
    else if (srv != NULL && srv->conf->source == CONF_SOURCE_ETCD)
        conflict = "the server comes from etcd: it leaves when its key does";
    else if (srv != NULL && srv->conf->source == CONF_SOURCE_DNS)
        conflict = "the server comes from DNS: it leaves when its record does";
    else if (srv != NULL) {
        lb_server_delete(d, srv, "operator: delete");   /* out of rotation now */
        (void)lb_members_api_remove(d, o->pool, o->server);
        active = bal_server_active(srv->pool->bal, srv->index);
        drain_ms = srv->pool->conf->drain_timeout_ms;
    }
    pthread_mutex_unlock(&d->state_lock);
    if (srv == NULL)
        lb_order_not_found(d, o->wait, pool_found);
    else if (conflict != NULL)
        lb_order_error(d, o->wait, 409, "Conflict", conflict);
    else
        lb_order_members_reload(d, o, o->server, active, drain_ms);
}

/* POST /pools/P/servers/S/weight {"weight":N}: from the next pick, for a
 * server of any source, until it leaves the pool. 0 keeps it in the pool
 * with no new connections: it drains (as HAProxy's weight 0 does); a
 * weight after 0 takes it back, unless another input holds it out. */
static void
lb_order_weight(struct lb_daemon *d, const struct lb_admin_order *o)
{
    struct lb_server *srv;
    bool pool_found;

    if (o->weight > CONF_WEIGHT_MAX) {
        lb_order_error(d, o->wait, 400, "Bad Request", "weight: use 0 to 256");
        return;
    }
    pthread_mutex_lock(&d->state_lock);
    srv = lb_admin_find_server(d, o->pool, o->server, &pool_found);
    if (srv != NULL) {
        lb_members_weight_set(d, o->pool, o->server, o->weight);
        lb_server_set_weight(d, srv, o->weight);
    }
    pthread_mutex_unlock(&d->state_lock);
    if (srv == NULL)
        lb_order_not_found(d, o->wait, pool_found);
    else if (o->weight != 0)            /* the picks' weights: a new generation */
        lb_order_members_reload(d, o, o->server, 0, 0);
    else
        lb_order_answer_server(d, o->wait, 200, "OK", o->pool, o->server);
}

/* Whether a heartbeat's "NAME ADDRESS[ weight=N]" gives srv's own address
 * (as its line or registration wrote it); true without one. */
static bool
lb_order_same_address(const struct lb_server *srv, const char *server_line)
{
    const char *addr = strchr(server_line, ' ');
    size_t len;

    if (server_line[0] == '\0' || addr == NULL)
        return true;
    addr++;
    len = strcspn(addr, " ");
    return strlen(srv->conf->addr.text) == len && memcmp(srv->conf->addr.text, addr, len) == 0;
}

/* The ephemeral server srv replaced by the heartbeat o's registration
 * (another address): srv out now and draining, the new one added by the
 * members reload the caller asks for. 0, 1 with *conflict (the address is
 * another server's), -1 out of memory. Caller holds state_lock. */
static int
lb_order_replace(struct lb_daemon *d, struct lb_server *srv, const struct lb_admin_order *o,
                 const char **conflict)
{
    struct lb_member mb = { .is_ephemeral = true };
    char err[512], reason[CONF_NAME_MAX + 300];
    int rc;

    if (lb_order_member(o->server_line, &mb, err, sizeof(err)) != 0) {
        *conflict = "the heartbeat's address does not parse";
        return 1;
    }
    rc = lb_members_api_replace(d, srv->pool->conf, &mb, conflict);
    if (rc == 0) {
        snprintf(reason, sizeof(reason), "ephemeral: replaced by %s", mb.address);
        lb_server_delete(d, srv, reason);
    }
    return rc;
}

/* POST /pools/P/servers/S/heartbeat: the server's own word on its health,
 * which can only lower it (lb_server_heartbeat). 200 with what it is now;
 * 409 for a pool without heartbeat_ttl (a deploy error, not a no-op). The
 * hot path of 10,000 servers heartbeating: one hash lookup and a few
 * stores under state_lock, a small answer. */
static void
lb_order_heartbeat(struct lb_daemon *d, const struct lb_admin_order *o)
{
    struct lb_server *srv;
    struct evbuffer *b;
    bool pool_found, is_off = false, is_moved = false, in_rotation = false;
    const char *health = "", *conflict = NULL;
    char moved[CONF_ADDR_TEXT_MAX + 160];
    int rc;
    uint64_t ttl = 0;

    pthread_mutex_lock(&d->state_lock);
    srv = lb_admin_find_server(d, o->pool, o->server, &pool_found);
    /* an ephemeral server the pool lost (deleted, or a restart of the
     * registry's side): its heartbeat with an address registers it */
    if (srv == NULL && pool_found && o->server_line[0] != '\0') {
        pthread_mutex_unlock(&d->state_lock);
        lb_order_add(d, o);
        return;
    }
    if (srv != NULL && (ttl = srv->pool->conf->heartbeat_ttl_ms) == 0) {
        is_off = true;
    } else if (srv != NULL && !lb_order_same_address(srv, o->server_line) &&
               srv->conf->is_ephemeral && srv->b->is_beat_expired) {
        /* An instance back elsewhere under the same name (a pod with a new
         * IP) once the old address went silent: it replaces it, the old
         * one drains. Until then the old one's heartbeats decide. */
        rc = lb_order_replace(d, srv, o, &conflict);
        pthread_mutex_unlock(&d->state_lock);
        if (rc == 0)
            lb_order_members_reload(d, o, o->server, 0, 0);
        else
            lb_order_error(d, o->wait, rc == 1 ? 409 : 500,
                           rc == 1 ? "Conflict" : "Internal Server Error",
                           rc == 1 ? conflict : "out of memory");
        return;
    } else if (srv != NULL && !lb_order_same_address(srv, o->server_line)) {
        /* heartbeats from another address must not keep this one alive */
        is_moved = true;
        snprintf(moved, sizeof(moved), "the server %s has address %s%s", srv->conf->name,
                 srv->conf->addr.text, srv->conf->is_ephemeral
                     ? ": another address replaces it once its heartbeats stop for "
                       "heartbeat_ttl, or DELETE it"
                     : "");
    } else if (srv != NULL) {
        lb_server_heartbeat(d, srv, o->beat, o->note);
        in_rotation = atomic_load_explicit(&srv->b->live.in_rotation, memory_order_relaxed);
        health = lb_server_health_name(srv);
    }
    pthread_mutex_unlock(&d->state_lock);
    if (srv == NULL) {
        lb_order_not_found(d, o->wait, pool_found);
        return;
    }
    if (is_off || is_moved) {
        lb_order_error(d, o->wait, 409, "Conflict",
                       is_off ? "heartbeats are off in this pool: set heartbeat_ttl" : moved);
        return;
    }
    if ((b = evbuffer_new()) != NULL)
        evbuffer_add_printf(b, "{\"status\":\"%s\",\"health\":\"%s\",\"in_rotation\":%s,"
                            "\"heartbeat_ttl_ms\":%llu}\n", bal_beat_name(o->beat), health,
                            in_rotation ? "true" : "false", (unsigned long long)ttl);
    lb_order_answer(d, o->wait, 200, "OK", b);
}

/* POST /reload: the same as SIGHUP, answered with its outcome: 200, or 400
 * with the config errors (the old config keeps serving). */
static void
lb_order_on_reload(struct lb_daemon *d, void *arg, int rc, const char *msg)
{
    struct evbuffer *b = evbuffer_new();

    if (rc == 0) {
        if (b != NULL)      /* main's own generation pointer: no lock to read it */
            evbuffer_add_printf(b, "{\"reloaded\":true,\"generation\":%llu}\n",
                                (unsigned long long)d->gen->number);
        lb_order_answer(d, arg, 200, "OK", b);
    } else {
        if (b != NULL)
            lb_admin_error_body(b, msg);
        lb_order_answer(d, arg, 400, "Bad Request", b);
    }
}

void
lb_admin_on_orders(void *msgs, size_t n, void *arg)
{
    struct lb_daemon *d = arg;
    const struct lb_admin_order *o = msgs;

    for (size_t i = 0; i < n; i++) {
        switch (o[i].kind) {
        case LB_ADMIN_ORDER_ACTION:
            lb_order_action(d, &o[i]);
            break;
        case LB_ADMIN_ORDER_WEIGHT:
            lb_order_weight(d, &o[i]);
            break;
        case LB_ADMIN_ORDER_ADD:
            lb_order_add(d, &o[i]);
            break;
        case LB_ADMIN_ORDER_DELETE:
            lb_order_delete(d, &o[i]);
            break;
        case LB_ADMIN_ORDER_HEARTBEAT:
            lb_order_heartbeat(d, &o[i]);
            break;
        case LB_ADMIN_ORDER_RELOAD:
            lb_reload_request(d, lb_order_on_reload, o[i].wait);
            break;
        }
    }
}
