/*
 * gen.c - the configuration generation: frontends, pools and servers built
 * from one read of the config file.
 *
 * Main builds it; workers and sessions hold references. It is immutable after
 * lb_gen_new apart from atomic counters and the balancer's rotation flags, so
 * readers need no lock. The last lb_gen_unref frees it: a reload swaps the
 * current pointer and the old generation goes with its last session.
 *
 * What must outlive one generation is shared, not copied, so that nothing is
 * lost and nothing is counted twice while old connections still run:
 *   - a server kept by a reload (same pool, name and address) keeps its
 *     struct lb_backend: health, operator state, counters, active count;
 *   - a frontend kept by name keeps its counters (struct lb_fe_stats);
 *   - an address kept by a frontend keeps its listening sockets (struct
 *     lb_listen), so there is no moment where connections are refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state.h"

static enum bal_algo
lb_gen_algo(enum conf_balance b)
{
    switch (b) {
    case CONF_BALANCE_LEASTCONN: return BAL_ALGO_LEASTCONN;
    case CONF_BALANCE_SOURCE:    return BAL_ALGO_SOURCE;
    case CONF_BALANCE_RANDOM:    return BAL_ALGO_RANDOM;
    case CONF_BALANCE_ROUNDROBIN:
    default:                     return BAL_ALGO_ROUNDROBIN;
    }
}

/* --------------------------------------------------------------- backends */

static void
lb_backend_unref(struct lb_backend *b)
{
    if (b != NULL && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        free(b->last_check);
        free(b->beat_note);
        free(b->agent_note);
        free(b->last_agent);
        free(b->outlier);
        free(b);
    }
}

/* A new server's health: a fresh start serves it at once, a reload only
 * after its first passing probe; a server without a check is simply up.
 * Its operator inputs: none, at its configured weight (the admin API's 0
 * is set before the first decision: lb_members_weigh_gen). */
static struct lb_backend *
lb_backend_new(const struct conf_pool *cp, const struct conf_server *cs, uint32_t id,
               bool is_reload)
{
    struct lb_backend *b = calloc(1, sizeof(*b));

    if (b == NULL)
        return NULL;
    atomic_init(&b->refs, 1);
    b->id = id;
    b->op.weight = cs->weight;
    b->beat = BAL_BEAT_PASS;            /* until a report says otherwise */
    if (cp->check == CONF_CHECK_NONE) {
        bal_health_init(&b->health, cp->rise, cp->fall);
        (void)bal_health_restore(&b->health, BAL_HEALTH_UP, 0, 0, 0);
    } else if (is_reload) {
        bal_health_init_pending(&b->health, cp->rise, cp->fall);
    } else {
        bal_health_init(&b->health, cp->rise, cp->fall);
    }
    /* Out of rotation until the generation's first decision places it. */
    atomic_init(&b->live.in_rotation, false);
    atomic_init(&b->live.active_connections, 0);
    atomic_init(&b->live.share, BAL_SHARE_FULL);
    return b;
}

static uint64_t
lb_gen_key(const char *pool, const char *server)
{
    return bal_hash_bytes(pool, strlen(pool)) * 31 + bal_hash_bytes(server, strlen(server));
}

/* g's servers by pool and server name (g->index): an open-addressing
 * table, so that a reload matching a pool of 10,000 servers costs 10,000
 * lookups, not 50 million comparisons, and a heartbeat one lookup. */
static int
lb_gen_index_init(struct lb_gen *g)
{
    size_t cap = 16;

    while (cap < g->nservers * 2)
        cap *= 2;
    g->index.slots = calloc(cap, sizeof(*g->index.slots));
    if (g->index.slots == NULL)
        return -1;
    g->index.mask = cap - 1;
    for (size_t i = 0; i < g->nservers; i++) {
        struct lb_server *s = g->servers[i];
        size_t k = lb_gen_key(s->pool->conf->name, s->conf->name) & g->index.mask;

        while (g->index.slots[k] != NULL)
            k = (k + 1) & g->index.mask;
        g->index.slots[k] = s;
    }
    return 0;
}

struct lb_server *
lb_gen_find_server(const struct lb_gen *g, const char *pool, const char *server)
{
    if (g == NULL || g->index.slots == NULL)
        return NULL;
    for (size_t k = lb_gen_key(pool, server) & g->index.mask; g->index.slots[k] != NULL;
         k = (k + 1) & g->index.mask) {
        struct lb_server *s = g->index.slots[k];

        if (strcmp(s->conf->name, server) == 0 && strcmp(s->pool->conf->name, pool) == 0)
            return s;
    }
    return NULL;
}

/* The kept backend of the old generation, matched by pool name, server name
 * and address (an address change counts as a removal and an addition). */
static struct lb_backend *
lb_gen_find_backend(const struct lb_gen *old, const char *pool, const struct conf_server *cs)
{
    const struct lb_server *s = lb_gen_find_server(old, pool, cs->name);

    return s != NULL && strcmp(s->conf->addr.text, cs->addr.text) == 0 ? s->b : NULL;
}

/* ----------------------------------------------------------- listen sets */

/* The sockets of an address lb does not listen on yet: one per worker.
 * *in_use is set when another socket holds the address. */
static struct lb_listen *
lb_listen_new(const struct conf_addr *addr, int type, size_t nworkers, bool is_lbs,
              bool *in_use, char *err, size_t errlen)
{
    struct lb_listen *l = calloc(1, sizeof(*l) + nworkers * sizeof(l->fds[0]));
    const struct sockaddr *sa = (const struct sockaddr *)&addr->ss;
    char lerr[128];
    int e;

    *in_use = false;
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    atomic_init(&l->refs, 1);
    atomic_init(&l->weak, 1);
    atomic_init(&l->nopen, 0);
    l->addr = *addr;
    l->type = type;
    l->nfds = nworkers;
    for (size_t i = 0; i < nworkers; i++)
        l->fds[i] = -1;
    /* The workers' sockets set SO_REUSEPORT, and with it the kernel would
     * let them join any listener of the same user that set it too (another
     * lb, say) and split that port's clients with it. So the address is
     * proved free first, by a bind without the option. The window left:
     * from the probe's close to the first bind below, microseconds, in
     * which a process of the same user binding with SO_REUSEPORT would
     * still be shared with; one that comes later is the kernel's to allow
     * (a second lb stops at its own probe). Only new addresses come here:
     * a reload that keeps an address shares its struct lb_listen
     * (lb_gen_frontend_init), and sockets handed over by the process an
     * upgrade replaces are adopted without a probe (lb_listen_adopt):
     * they are lb's own. Nor is an address lb still closes (is_lbs,
     * lb_gen_retires): the probe would meet lb's own retiring sockets and
     * refuse a reload that re-adds an address the one before dropped. The
     * new sockets join their group; a SYN the kernel gives a retiring one
     * is dropped by its filter and sent again once it closed. */
    e = is_lbs ? 0 : lb_net_check_free(sa, addr->len, type, lerr, sizeof(lerr));
    for (size_t i = 0; e == 0 && i < nworkers; i++) {
        l->fds[i] = lb_net_listen(sa, addr->len, type, true, lerr, sizeof(lerr));
        if (l->fds[i] < 0)
            e = errno;
    }
    if (e != 0) {
        *in_use = e == EADDRINUSE;
        snprintf(err, errlen, "listen on %s: %s", addr->text, lerr);
        lb_listen_unref(l);
        return NULL;
    }
    atomic_store(&l->nopen, nworkers);
    return l;
}

struct lb_listen *
lb_listen_adopt(const int *fds, size_t n, size_t nworkers, char *err, size_t errlen)
{
    struct lb_listen *l = calloc(1, sizeof(*l) + nworkers * sizeof(l->fds[0]));
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss), tlen = sizeof(int);
    char lerr[128];
    size_t i;

    if (l == NULL || n == 0 || getsockname(fds[0], (struct sockaddr *)&ss, &len) == -1 ||
        getsockopt(fds[0], SOL_SOCKET, SO_TYPE, &l->type, &tlen) == -1) {
        snprintf(err, errlen, l == NULL ? "out of memory" : "a handed-over socket has no address");
        for (i = 0; i < n; i++)
            close(fds[i]);
        free(l);
        return NULL;
    }
    atomic_init(&l->refs, 1);
    atomic_init(&l->weak, 1);
    atomic_init(&l->nopen, 0);
    memcpy(&l->addr.ss, &ss, len);
    l->addr.len = len;
    lb_net_addr_text((const struct sockaddr *)&ss, l->addr.text, sizeof(l->addr.text));
    l->nfds = nworkers;
    for (i = 0; i < nworkers; i++)
        l->fds[i] = i < n ? fds[i] : -1;
    /* More workers than before: their sockets join the same SO_REUSEPORT
     * group. Fewer: the surplus sockets are closed here and, once the old
     * process closes its copies, the connections in their queues are
     * reset, as at any close of a listener; keep workers across an
     * upgrade (README). */
    for (; i < n; i++)
        close(fds[i]);
    for (i = n; i < nworkers; i++) {
        l->fds[i] = lb_net_listen((const struct sockaddr *)&ss, len, l->type, true, lerr,
                                  sizeof(lerr));
        if (l->fds[i] < 0) {
            snprintf(err, errlen, "listen on %s: %s", l->addr.text, lerr);
            lb_listen_unref(l);
            return NULL;
        }
    }
    atomic_store(&l->nopen, nworkers);
    return l;
}

/* A gone list's reference (lb_gen_gone_init) keeps the struct, to read
 * its address and nopen, but not its sockets: those close with the last
 * generation that listens on them, as without that list. */
static void
lb_listen_weak_unref(struct lb_listen *l)
{
    if (atomic_fetch_sub_explicit(&l->weak, 1, memory_order_acq_rel) == 1)
        free(l);
}

void
lb_listen_unref(struct lb_listen *l)
{
    if (l == NULL || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* Workers close their own socket when they stop using the address,
     * before they let go of its generation; what is left was never handed
     * to a worker. */
    for (size_t i = 0; i < l->nfds; i++) {
        if (l->fds[i] >= 0)
            close(l->fds[i]);
    }
    atomic_store_explicit(&l->nopen, 0, memory_order_release);
    lb_listen_weak_unref(l);
}

/* The socket type of a frontend's listen set. */
static int
lb_frontend_socktype(const struct conf_frontend *cf)
{
    return cf->protocol == CONF_PROTOCOL_UDP ? SOCK_DGRAM : SOCK_STREAM;
}

/* Whether l listens on cf's address (TCP and UDP ports are apart). */
static bool
lb_listen_is(const struct lb_listen *l, const struct conf_frontend *cf)
{
    return l->type == lb_frontend_socktype(cf) && l->addr.len == cf->listen.len &&
           memcmp(&l->addr.ss, &cf->listen.ss, cf->listen.len) == 0;
}

/* Whether a worker may still have a socket open on addr that an earlier
 * generation dropped: still accepting (it has not switched yet) or
 * retiring (lb_worker_listener_retire). */
static bool
lb_gen_retires(const struct lb_gen *old, const struct conf_frontend *cf)
{
    for (size_t i = 0; old != NULL && i < old->ngone; i++) {
        if (lb_listen_is(old->gone[i], cf) &&
            atomic_load_explicit(&old->gone[i]->nopen, memory_order_acquire) > 0)
            return true;
    }
    return false;
}

static bool
lb_gen_has_listen(const struct lb_gen *g, const struct lb_listen *l)
{
    for (size_t i = 0; i < g->conf->nfrontends; i++) {
        if (g->frontends[i].listen == l)
            return true;
    }
    return false;
}

/* g->gone: the sockets of old's addresses that g drops, and those old
 * still lists that are not closed yet; lb_gen_retires reads it at the next
 * reload. */
static int
lb_gen_gone_init(struct lb_gen *g, const struct lb_gen *old)
{
    size_t n = 0;

    if (old == NULL)
        return 0;
    g->gone = calloc(old->conf->nfrontends + old->ngone + 1, sizeof(*g->gone));
    if (g->gone == NULL)
        return -1;
    for (size_t i = 0; i < old->conf->nfrontends + old->ngone; i++) {
        struct lb_listen *l = i < old->conf->nfrontends ? old->frontends[i].listen
                                                        : old->gone[i - old->conf->nfrontends];

        if (lb_gen_has_listen(g, l) ||
            atomic_load_explicit(&l->nopen, memory_order_acquire) == 0)
            continue;
        atomic_fetch_add(&l->weak, 1);
        g->gone[n++] = l;
    }
    g->ngone = n;
    return 0;
}

/* ---------------------------------------------------------------- pools */

static struct lb_pool_shared *
lb_pool_shared_new(void)
{
    struct lb_pool_shared *ps = calloc(1, sizeof(*ps));

    if (ps == NULL)
        return NULL;
    if (pthread_mutex_init(&ps->queue.lock, NULL) != 0) {
        free(ps);
        return NULL;
    }
    atomic_init(&ps->refs, 1);
    return ps;
}

/* The queue is empty by then: a waiter holds a reference to its
 * generation, which holds this. */
static void
lb_pool_shared_unref(struct lb_pool_shared *ps)
{
    if (ps == NULL || atomic_fetch_sub(&ps->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&ps->queue.lock);
    free(ps);
}

static int
lb_gen_pool_init(struct lb_gen *g, struct lb_pool *p, const struct conf_pool *cp,
                 size_t index, const struct lb_gen *old,
                 uint32_t *next_id)
{
    size_t n = cp->nservers;
    uint32_t *weights = calloc(n ? n : 1, sizeof(*weights));
    const char **names = calloc(n ? n : 1, sizeof(*names));
    int rc = -1;

    p->conf = cp;
    p->index = index;
    for (size_t i = 0; old != NULL && i < old->conf->npools; i++) {
        if (strcmp(old->pools[i].conf->name, cp->name) == 0) {
            p->shared = old->pools[i].shared;
            atomic_fetch_add(&p->shared->refs, 1);
        }
    }
    if (p->shared == NULL)
        p->shared = lb_pool_shared_new();
    p->servers = calloc(n ? n : 1, sizeof(*p->servers));
    if (weights == NULL || names == NULL || p->shared == NULL || p->servers == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        struct lb_server *srv = &p->servers[i];
        struct lb_backend *b = lb_gen_find_backend(old, cp->name, &cp->servers[i]);

        if (b != NULL)
            atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
        else
            b = lb_backend_new(cp, &cp->servers[i], (*next_id)++, old != NULL);
        if (b == NULL)
            goto out;
        srv->b = b;
        srv->conf = &cp->servers[i];
        srv->pool = p;
        srv->index = i;
        weights[i] = cp->servers[i].weight;
        names[i] = cp->servers[i].name;
    }
    p->bal = bal_pool_new(lb_gen_algo(cp->balance), n, weights, names);
    if (p->bal == NULL)
        goto out;
    /* One rotation flag and one count per server, whatever generation
     * picks it. */
    for (size_t i = 0; i < n; i++) {
        bal_server_share(p->bal, i, &p->servers[i].b->live);
        bal_server_set_cap(p->bal, i, lb_server_cap(&p->servers[i]));
        g->nservers++;
    }
    bal_pool_shared(p->bal);
    rc = 0;
out:
    free(weights);
    free(names);
    return rc;
}

static void
lb_gen_free(struct lb_gen *g)
{
    if (g->pools != NULL) {
        for (size_t i = 0; i < g->conf->npools; i++) {
            struct lb_pool *p = &g->pools[i];

            if (p->conf == NULL)            /* not built: a failed build */
                continue;
            for (size_t k = 0; p->servers != NULL && k < p->conf->nservers; k++)
                lb_backend_unref(p->servers[k].b);
            bal_pool_free(p->bal);
            free(p->servers);
            lb_pool_shared_unref(p->shared);
        }
    }
    if (g->frontends != NULL) {
        for (size_t i = 0; i < g->conf->nfrontends; i++) {
            struct lb_route *r = g->frontends[i].routes;

            for (size_t k = 0; r != NULL && k < g->conf->frontends[i].routes.n; k++) {
                if (r[k].stats != NULL && atomic_fetch_sub(&r[k].stats->refs, 1) == 1)
                    free(r[k].stats);
            }
            free(r);
            lb_listen_unref(g->frontends[i].listen);
            if (g->frontends[i].stats != NULL &&
                atomic_fetch_sub(&g->frontends[i].stats->refs, 1) == 1) {
                lb_sources_free(g->frontends[i].stats->sources);
                free(g->frontends[i].stats);
            }
        }
    }
    for (size_t i = 0; i < g->ngone; i++)
        lb_listen_weak_unref(g->gone[i]);
    free(g->gone);
    free(g->pools);
    free(g->frontends);
    free(g->servers);
    free(g->by_id);
    free(g->index.slots);
    conf_free(g->conf);
    free(g);
}

/* The routes of fe, their counts those of the same patterns in old (the
 * frontend of the same name in the previous generation, or NULL). Both
 * lists are sorted by pattern: one walk. -1 when out of memory. */
static int
lb_gen_routes_init(struct lb_frontend *fe, struct lb_gen *g, const struct lb_frontend *old)
{
    const struct conf_routes *cr = &fe->conf->routes;
    size_t k = 0, nold = old != NULL ? old->conf->routes.n : 0;

    if (cr->n == 0)
        return 0;
    if ((fe->routes = calloc(cr->n, sizeof(*fe->routes))) == NULL)
        return -1;
    for (size_t i = 0; i < cr->n; i++) {
        struct lb_route *r = &fe->routes[i];
        int d = 1;

        r->conf = &cr->v[i];
        r->pool = &g->pools[cr->v[i].pool_index];
        while (k < nold && (d = strcmp(old->routes[k].conf->pattern, r->conf->pattern)) < 0)
            k++;
        if (k < nold && d == 0) {
            r->stats = old->routes[k].stats;
            atomic_fetch_add(&r->stats->refs, 1);
            continue;
        }
        if ((r->stats = calloc(1, sizeof(*r->stats))) == NULL)
            return -1;
        atomic_init(&r->stats->refs, 1);
    }
    return 0;
}

static int
lb_gen_frontend_init(struct lb_frontend *fe, const struct conf_frontend *cf,
                     struct lb_gen *g, const struct lb_gen *old,
                     struct lb_listen *const *adopt, size_t nadopt, size_t nworkers,
                     char *err, size_t errlen)
{
    const struct lb_frontend *old_fe = NULL;

    fe->conf = cf;
    if (cf->routes.n == 0) {
        fe->pool = &g->pools[cf->pool_index];
        fe->max_attempts = fe->pool->conf->retries + 1;
        fe->pool->serves_udp |= cf->protocol == CONF_PROTOCOL_UDP;
    }
    if (cf->default_pool != NULL) {
        fe->default_pool = &g->pools[cf->default_pool_index];
        fe->max_attempts = fe->default_pool->conf->retries + 1;
    }
    for (size_t i = 0; i < cf->routes.n; i++) {
        uint32_t n = g->pools[cf->routes.v[i].pool_index].conf->retries + 1;

        if (n > fe->max_attempts)
            fe->max_attempts = n;
    }
    for (size_t i = 0; i < nadopt && fe->listen == NULL; i++) {
        if (lb_listen_is(adopt[i], cf)) {
            fe->listen = adopt[i];
            atomic_fetch_add(&fe->listen->refs, 1);
        }
    }
    for (size_t i = 0; old != NULL && i < old->conf->nfrontends; i++) {
        const struct lb_frontend *o = &old->frontends[i];

        if (fe->listen == NULL && lb_listen_is(o->listen, cf)) {
            fe->listen = o->listen;
            atomic_fetch_add(&fe->listen->refs, 1);
        }
        if (fe->stats == NULL && strcmp(o->conf->name, cf->name) == 0) {
            fe->stats = o->stats;
            atomic_fetch_add(&fe->stats->refs, 1);
            old_fe = o;
        }
    }
    if (lb_gen_routes_init(fe, g, old_fe) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (fe->stats == NULL) {
        fe->stats = calloc(1, sizeof(*fe->stats));
        if (fe->stats == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        atomic_init(&fe->stats->refs, 1);
    }
    /* The table outlives generations with the frontend's name, so that a
     * reload keeps its counts; the first limit makes it, a new size
     * resizes it (under its lock: older generations' workers use it). */
    if (cf->max_connections_per_source != 0 || cf->rate_per_source != 0) {
        if (fe->stats->sources == NULL)
            fe->stats->sources = lb_sources_new(cf->source_table_size);
        else
            lb_sources_resize(fe->stats->sources, cf->source_table_size);
        if (fe->stats->sources == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    if (fe->listen == NULL) {
        char lerr[448];     /* "listen on ADDR: ERROR" */
        bool in_use;

        fe->listen = lb_listen_new(&cf->listen, lb_frontend_socktype(cf), nworkers,
                                   lb_gen_retires(old, cf), &in_use, lerr, sizeof(lerr));
        if (fe->listen == NULL && in_use) {
            snprintf(err, errlen, "%s:%d: %s is already in use", g->conf->file,
                     cf->listen_line, cf->listen.text);
            return -1;
        }
        if (fe->listen == NULL) {
            snprintf(err, errlen, "%s:%d: frontend %s: %s", g->conf->file,
                     cf->listen_line, cf->name, lerr);
            return -1;
        }
    }
    return 0;
}

/* Whether b had an agent in old: when not, the agent check this generation
 * gives it is a new target of the health module, whose replies count from
 * sequence 1 again. */
static bool
lb_gen_had_agent(const struct lb_gen *old, const struct lb_backend *b)
{
    const struct lb_server *srv = old != NULL && b->id < old->nby_id ? old->by_id[b->id] : NULL;

    return srv != NULL && srv->b == b && srv->conf->agent_port != 0;
}

/* A new agent (a reload gave the server agent_port again): what an earlier
 * one said is forgotten, and the new one's replies are taken from its
 * first. Written before the generation is committed: the old one's server
 * has no agent_port and reads none of it (lb_server_agent, lb_server_cap). */
static void
lb_backend_agent_reset(struct lb_backend *b)
{
    b->agent = (struct bal_agent_verdict){ 0 };
    b->has_agent_maxconn = false;
    b->agent_maxconn = 0;
    free(b->agent_note);
    b->agent_note = NULL;
    b->agent_seq = 0;
    free(b->last_agent);
    b->last_agent = NULL;
}

struct lb_gen *
lb_gen_new(struct conf *conf, const struct lb_gen *old, struct lb_listen *const *adopt,
           size_t nadopt, size_t nworkers, uint32_t *next_id, char *err, size_t errlen)
{
    struct lb_gen *g = calloc(1, sizeof(*g));

    if (g == NULL) {
        conf_free(conf);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->conf = conf;
    g->number = old != NULL ? old->number + 1 : 1;
    atomic_init(&g->refs, 1);
    g->pools = calloc(conf->npools ? conf->npools : 1, sizeof(*g->pools));
    g->frontends = calloc(conf->nfrontends ? conf->nfrontends : 1, sizeof(*g->frontends));
    if (g->pools == NULL || g->frontends == NULL)
        goto oom;
    for (size_t i = 0; i < conf->npools; i++) {
        if (lb_gen_pool_init(g, &g->pools[i], &conf->pools[i], i, old, next_id) == -1)
            goto oom;
    }
    /* The agents' keys after every server's: at a start the servers' ids
     * and the agents' are each a run, which the health threads share out
     * evenly (id % threads). */
    for (size_t i = 0; i < conf->npools; i++) {
        for (size_t j = 0; j < conf->pools[i].nservers; j++) {
            struct lb_backend *b = g->pools[i].servers[j].b;

            if (conf->pools[i].servers[j].agent_port == 0)
                continue;
            if (!b->has_agent_id) {
                b->agent_id = (*next_id)++;
                b->has_agent_id = true;
            }
            if (!lb_gen_had_agent(old, b))
                lb_backend_agent_reset(b);
        }
    }
    g->servers = calloc(g->nservers ? g->nservers : 1, sizeof(*g->servers));
    g->nby_id = *next_id;
    g->by_id = calloc(g->nby_id ? g->nby_id : 1, sizeof(*g->by_id));
    if (g->servers == NULL || g->by_id == NULL)
        goto oom;
    for (size_t i = 0, k = 0; i < conf->npools; i++) {
        for (size_t j = 0; j < conf->pools[i].nservers; j++, k++) {
            struct lb_server *srv = &g->pools[i].servers[j];

            g->servers[k] = srv;
            g->by_id[srv->b->id] = srv;
            if (srv->b->has_agent_id)
                g->by_id[srv->b->agent_id] = srv;
        }
    }
    if (lb_gen_index_init(g) == -1)
        goto oom;
    for (size_t i = 0; i < conf->nfrontends; i++) {
        if (lb_gen_frontend_init(&g->frontends[i], &conf->frontends[i], g, old, adopt, nadopt,
                                 nworkers, err, errlen) == -1)
            goto fail;
    }
    if (lb_gen_gone_init(g, old) == -1)
        goto oom;
    return g;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    lb_gen_free(g);
    return NULL;
}

void
lb_gen_ref(struct lb_gen *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
}

void
lb_gen_unref(struct lb_gen *g)
{
    /* acq_rel: the thread that frees must see every write made under the
     * other references. */
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1)
        lb_gen_free(g);
}
