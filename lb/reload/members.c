/*
 * members.c - the servers of a pool that are not in the file: those its
 * discovery finds in DNS and those the admin API adds.
 *
 * The file's servers (d->file_conf) and these members make each
 * generation: every reload, of the file or of the members, builds a copy of
 * the file's config with the members appended (lb_members_apply) and moves
 * to it as a reload does, so a kept server keeps its state, a new one waits
 * for its first probe and a gone one drains. A member whose name or
 * address is already in its pool is skipped: the file's servers come
 * first, then the API's, then the discovered ones.
 *
 * A discovery round that fails or comes back empty changes nothing: the
 * last good set stays, and /stats says why (lb_members_status). A changed
 * set asks for a members reload, from the loop (members_ev), never inside
 * the round's callback. Main thread; the lists and the status also under
 * state_lock, for the admin thread.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "bal_lines.h"
#include "daemon.h"
#include "reload.h"
#include "reload_int.h"
#include "state.h"
#include "tier.h"
#include "dsc_dns.h"
#include "dsc_etcd.h"

/* The weight a discovered server gets at most (SRV weights go to 65535). */
#define LB_MEMBERS_WEIGHT_MAX 256

static struct lb_log_limit lb_discover_failed_log = LB_LOG_LIMIT(10);

static struct lb_members *
lb_members_find(struct lb_daemon *d, const char *pool)
{
    for (size_t i = 0; i < d->reload->nmembers; i++) {
        if (strcmp(d->reload->members[i]->pool, pool) == 0)
            return d->reload->members[i];
    }
    return NULL;
}

static struct lb_members *
lb_members_get(struct lb_daemon *d, const char *pool)
{
    struct lb_members *m = lb_members_find(d, pool), **grown;

    if (m != NULL)
        return m;
    if ((m = calloc(1, sizeof(*m))) == NULL ||
        (grown = realloc(d->reload->members, (d->reload->nmembers + 1) * sizeof(*grown))) == NULL) {
        free(m);
        return NULL;
    }
    snprintf(m->pool, sizeof(m->pool), "%s", pool);
    d->reload->members = grown;
    d->reload->members[d->reload->nmembers++] = m;
    m->d = d;
    return m;
}

static void
lb_members_free(struct lb_members *m)
{
    dsc_free(m->dsc);
    free(m->dns);
    free(m->api);
    free(m->weights);
    free(m);
}

/* ------------------------------------------------------------- apply */

/* Why mb cannot join pool p (its name or its address is there), or NULL.
 * is_replacing: mb takes the place of the server of its name, which is
 * then no clash, its address neither. */
static const char *
lb_members_clash(const struct conf_pool *p, const struct lb_member *mb, bool is_replacing)
{
    for (size_t i = 0; i < p->nservers; i++) {
        if (strcmp(p->servers[i].name, mb->name) == 0) {
            if (is_replacing)
                continue;
            return "a server of this name is in the pool";
        }
        if (strcmp(p->servers[i].addr.text, mb->address) == 0)
            return "a server with this address is in the pool";
    }
    return NULL;
}

/* The servers of a pool by name or by address while its members are
 * appended: their indexes in the pool's array (which grows, and moves,
 * as they are appended), open addressing. A member is looked up here
 * instead of against every server before it, which made a members reload
 * of n servers O(n^2): 10,000 keys of etcd were 50 million string compares
 * a reload. */
struct lb_members_seen {
    const struct conf_pool *pool;
    bool by_addr;                       /* else by name */
    size_t *slots;                      /* SIZE_MAX: empty */
    size_t mask;
};

static int
lb_members_seen_init(struct lb_members_seen *t, const struct conf_pool *pool, bool by_addr,
                     size_t n)
{
    size_t size = 16;

    while (size < 2 * n)
        size *= 2;
    t->pool = pool;
    t->by_addr = by_addr;
    t->mask = size - 1;
    if ((t->slots = malloc(size * sizeof(*t->slots))) == NULL)
        return -1;
    memset(t->slots, 0xff, size * sizeof(*t->slots));
    return 0;
}

static const char *
lb_members_seen_key(const struct lb_members_seen *t, size_t index)
{
    const struct conf_server *cs = &t->pool->servers[index];

    return t->by_addr ? cs->addr.text : cs->name;
}

/* Whether a server of the pool has key s. */
static bool
lb_members_seen(const struct lb_members_seen *t, const char *s)
{
    for (size_t i = (size_t)bal_hash_bytes(s, strlen(s)) & t->mask; t->slots[i] != SIZE_MAX;
         i = (i + 1) & t->mask) {
        if (strcmp(lb_members_seen_key(t, t->slots[i]), s) == 0)
            return true;
    }
    return false;
}

/* Adds the pool's server at index (its key not there yet). */
static void
lb_members_seen_add(struct lb_members_seen *t, size_t index)
{
    const char *s = lb_members_seen_key(t, index);
    size_t i = (size_t)bal_hash_bytes(s, strlen(s)) & t->mask;

    while (t->slots[i] != SIZE_MAX)
        i = (i + 1) & t->mask;
    t->slots[i] = index;
}

/* Appends pool pi's members of each list in turn (lists[k], counts[k],
 * sources[k]), each unless its name or address is in the pool by then:
 * the file's servers first, then the earlier lists'. */
static int
lb_members_append(struct conf *c, size_t pi, const struct lb_member *const *lists,
                  const size_t *counts, const enum conf_source *sources, size_t nlists,
                  char *err, size_t errlen)
{
    struct conf_pool *p = &c->pools[pi];
    struct lb_members_seen names = { 0 }, addrs = { 0 };
    size_t total = p->nservers;
    int rc = 0;

    for (size_t k = 0; k < nlists; k++)
        total += counts[k];
    if (lb_members_seen_init(&names, p, false, total) != 0 ||
        lb_members_seen_init(&addrs, p, true, total) != 0) {
        free(names.slots);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* file servers with one name are an error of the file; one address
     * twice is allowed there, and kept once here */
    for (size_t i = 0; i < p->nservers; i++) {
        if (!lb_members_seen(&names, p->servers[i].name))
            lb_members_seen_add(&names, i);
        if (!lb_members_seen(&addrs, p->servers[i].addr.text))
            lb_members_seen_add(&addrs, i);
    }
    for (size_t k = 0; k < nlists && rc == 0; k++) {
        for (size_t i = 0; i < counts[k] && rc == 0; i++) {
            const struct lb_member *mb = &lists[k][i];
            char line[sizeof(mb->name) + sizeof(mb->address) + 32];

            if (lb_members_seen(&names, mb->name) || lb_members_seen(&addrs, mb->address))
                continue;
            snprintf(line, sizeof(line), "%s %s weight=%u max_connections=%u", mb->name,
                     mb->address, mb->weight, mb->max_connections);
            rc = conf_pool_add_server(c, pi, line, sources[k], err, errlen);
            if (rc != 0)
                break;
            p->servers[p->nservers - 1].is_ephemeral = mb->is_ephemeral;
            lb_members_seen_add(&names, p->nservers - 1);
            lb_members_seen_add(&addrs, p->nservers - 1);
        }
    }
    free(names.slots);
    free(addrs.slots);
    return rc;
}

/* The admin API's weights over the pool's servers; a weight whose server
 * left the pool goes. 0 changes no weight (the server is drained). */
static void
lb_members_weigh(struct lb_members *m, struct conf_pool *p)
{
    size_t kept = 0;

    for (size_t i = 0; i < m->nweights; i++) {
        struct conf_server *s = NULL;

        for (size_t j = 0; j < p->nservers && s == NULL; j++)
            s = strcmp(p->servers[j].name, m->weights[i].name) == 0 ? &p->servers[j] : NULL;
        if (s == NULL)
            continue;
        if (m->weights[i].weight != 0)
            s->weight = m->weights[i].weight;
        m->weights[kept++] = m->weights[i];
    }
    m->nweights = kept;
}

void
lb_members_weigh_gen(struct lb_daemon *d, struct lb_gen *g)
{
    for (size_t i = 0; i < g->nservers; i++)
        g->servers[i]->b->op.weight = g->servers[i]->conf->weight;
    for (size_t i = 0; i < d->reload->nmembers; i++) {
        const struct lb_members *m = d->reload->members[i];

        for (size_t k = 0; k < m->nweights; k++) {
            struct lb_server *srv = m->weights[k].weight == 0
                                        ? lb_gen_find_server(g, m->pool, m->weights[k].name)
                                        : NULL;

            if (srv != NULL)
                srv->b->op.weight = 0;
        }
    }
}

int
lb_members_apply(struct lb_daemon *d, struct conf *c, char *err, size_t errlen)
{
    int rc = 0;

    pthread_mutex_lock(&d->state_lock);
    for (size_t pi = 0; pi < c->npools && rc == 0; pi++) {
        struct lb_members *m = lb_members_find(d, c->pools[pi].name);

        if (m == NULL)
            continue;
        {
            const struct lb_member *lists[] = { m->api, m->dns };
            const size_t counts[] = { m->napi, m->ndns };
            const enum conf_source sources[] = {
                CONF_SOURCE_API,
                c->pools[pi].discover == CONF_DISCOVER_ETCD ? CONF_SOURCE_ETCD : CONF_SOURCE_DNS,
            };

            rc = lb_members_append(c, pi, lists, counts, sources, 2, err, errlen);
        }
        if (rc == 0)
            lb_members_weigh(m, &c->pools[pi]);
    }
    pthread_mutex_unlock(&d->state_lock);
    return rc;
}

/* ------------------------------------------------------------ the API */

static int
lb_members_push(struct lb_member **list, size_t *n, const struct lb_member *mb)
{
    struct lb_member *grown = realloc(*list, (*n + 1) * sizeof(*grown));

    if (grown == NULL)
        return -1;
    *list = grown;
    grown[(*n)++] = *mb;
    return 0;
}

int
lb_members_api_add(struct lb_daemon *d, const struct conf_pool *p, const struct lb_member *mb,
                   const char **conflict)
{
    struct lb_members *m = lb_members_find(d, p->name);

    if ((*conflict = lb_members_clash(p, mb, false)) != NULL)
        return 1;
    for (size_t i = 0; m != NULL && i < m->napi; i++) {
        if (strcmp(m->api[i].name, mb->name) == 0 || strcmp(m->api[i].address, mb->address) == 0) {
            *conflict = "a server of this name or address is being added";
            return 1;
        }
    }
    if (m == NULL && (m = lb_members_get(d, p->name)) == NULL)
        return -1;
    return lb_members_push(&m->api, &m->napi, mb);
}

int
lb_members_api_replace(struct lb_daemon *d, const struct conf_pool *p, const struct lb_member *mb,
                       const char **conflict)
{
    struct lb_members *m;

    if ((*conflict = lb_members_clash(p, mb, true)) != NULL)
        return 1;
    (void)lb_members_api_remove(d, p->name, mb->name);
    if ((m = lb_members_get(d, p->name)) == NULL)
        return -1;
    return lb_members_push(&m->api, &m->napi, mb);
}

const struct lb_member *
lb_members_api_find(const struct lb_daemon *d, const char *pool, const char *name)
{
    const struct lb_members *m = lb_members_find((struct lb_daemon *)d, pool);

    for (size_t i = 0; m != NULL && i < m->napi; i++) {
        if (strcmp(m->api[i].name, name) == 0)
            return &m->api[i];
    }
    return NULL;
}

bool
lb_members_api_remove(struct lb_daemon *d, const char *pool, const char *name)
{
    struct lb_members *m = lb_members_find(d, pool);

    for (size_t i = 0; m != NULL && i < m->napi; i++) {
        if (strcmp(m->api[i].name, name) == 0) {
            m->api[i] = m->api[--m->napi];
            return true;
        }
    }
    return false;
}

void
lb_members_weight_set(struct lb_daemon *d, const char *pool, const char *name, uint32_t weight)
{
    struct lb_members *m = lb_members_get(d, pool);
    struct lb_member w = { .weight = weight };

    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nweights; i++) {
        if (strcmp(m->weights[i].name, name) == 0) {
            m->weights[i].weight = weight;
            return;
        }
    }
    snprintf(w.name, sizeof(w.name), "%s", name);
    (void)lb_members_push(&m->weights, &m->nweights, &w);
}

/* ---------------------------------------------------------- discovery */

static bool
lb_members_same(const struct lb_member *a, size_t na, const struct lb_member *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 || strcmp(a[i].address, b[i].address) != 0 ||
            a[i].weight != b[i].weight)
            return false;
    }
    return true;
}

static void
lb_members_on_result(void *arg, const struct dsc_server *servers, size_t n, const char *error)
{
    struct lb_members *m = arg;
    struct lb_daemon *d = m->d;
    struct lb_member *set = NULL;
    bool is_changed = false;
    char qbuf[400];

    struct dsc_info info;

    dsc_info_of(m->dsc, &info);
    if (error == NULL && (set = calloc(n, sizeof(*set))) == NULL)
        error = "out of memory";
    if (error != NULL) {
        pthread_mutex_lock(&d->state_lock);
        snprintf(m->status.endpoint, sizeof(m->status.endpoint), "%s", info.endpoint);
        m->status.revision = info.revision;
        m->status.failures++;
        m->status.is_failing = true;
        m->status.last_failure = lb_wall_now();
        snprintf(m->status.last_error, sizeof(m->status.last_error), "%s", error);
        pthread_mutex_unlock(&d->state_lock);
        lb_log_limited(&lb_discover_failed_log, CONF_LOG_WARN, "discover_failed",
                       "pool=%s name=%s error=%s kept=%zu", m->pool, dsc_spec_of(m->dsc)->name,
                       lb_log_quote(qbuf, sizeof(qbuf), error), m->ndns);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(set[i].name, sizeof(set[i].name), "%s", servers[i].name);
        snprintf(set[i].address, sizeof(set[i].address), "%s", servers[i].address);
        set[i].weight = servers[i].weight < LB_MEMBERS_WEIGHT_MAX ? servers[i].weight
                                                                  : LB_MEMBERS_WEIGHT_MAX;
    }
    pthread_mutex_lock(&d->state_lock);
    snprintf(m->status.endpoint, sizeof(m->status.endpoint), "%s", info.endpoint);
    m->status.revision = info.revision;
    m->status.successes++;
    m->status.last_success = lb_wall_now();
    m->status.is_failing = false;
    if (!lb_members_same(set, n, m->dns, m->ndns)) {
        free(m->dns);
        m->dns = set;
        m->ndns = n;
        set = NULL;
        is_changed = true;
    }
    pthread_mutex_unlock(&d->state_lock);
    free(set);
    if (is_changed) {
        lb_log(CONF_LOG_INFO, "discover", "pool=%s name=%s servers=%zu", m->pool,
               dsc_spec_of(m->dsc)->name, n);
        event_active(d->reload->members_ev, EV_READ, 0);
    }
}

static int
lb_members_spec(const struct conf_pool *p, struct dsc_spec *spec, char *err, size_t errlen)
{
    memset(spec, 0, sizeof(*spec));
    if (p->discover == CONF_DISCOVER_ETCD) {
        int n = conf_endpoints_parse(p->discover_endpoints, spec->endpoints, CONF_ENDPOINTS_MAX,
                                     err, errlen);

        if (n < 0)
            return -1;
        spec->source = &dsc_etcd;
        spec->nendpoints = (size_t)n;
        snprintf(spec->name, sizeof(spec->name), "%s", p->discover_prefix);
        snprintf(spec->user, sizeof(spec->user), "%s", p->discover_user);
        snprintf(spec->password, sizeof(spec->password), "%s", p->discover_password);
        snprintf(spec->tls_ca, sizeof(spec->tls_ca), "%s", p->discover_tls_ca);
        snprintf(spec->label, sizeof(spec->label), "%s", p->name);
        return 0;
    }
    spec->source = p->discover == CONF_DISCOVER_DNS_A ? &dsc_dns_a : &dsc_dns_srv;
    snprintf(spec->name, sizeof(spec->name), "%s", p->discover_name);
    spec->port = (uint16_t)p->discover_port;
    spec->interval_ms = p->discover_interval_ms;
    if (p->discover_resolver.len != 0) {
        memcpy(&spec->endpoint, &p->discover_resolver.ss, p->discover_resolver.len);
        spec->endpoint_len = p->discover_resolver.len;
        return 0;
    }
    return dsc_resolver_from_file("/etc/resolv.conf", &spec->endpoint, &spec->endpoint_len, err,
                                  errlen);
}

/* After a commit: one discovery per pool of c that asks for it, kept when
 * its spec did not change (a changed one starts over, at once, and keeps
 * the last set until its first answer); the members of pools that are gone
 * go with them. Under state_lock throughout: the admin thread reads the
 * lists for /stats. */
void
lb_members_sync(struct lb_daemon *d, const struct conf *c)
{
    char err[256], qbuf[300];
    bool is_dropped = false;

    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < d->reload->nmembers; i++)
        d->reload->members[i]->is_seen = false;
    for (size_t pi = 0; pi < c->npools; pi++) {
        const struct conf_pool *p = &c->pools[pi];
        struct lb_members *m = lb_members_find(d, p->name);
        struct dsc_spec spec;

        if (m != NULL)
            m->is_seen = true;
        if (p->discover == CONF_DISCOVER_NONE) {
            if (m != NULL && m->dsc != NULL) {
                dsc_free(m->dsc);
                m->dsc = NULL;
                m->ndns = 0;            /* the members reload below drops them */
                is_dropped = true;
            }
            continue;
        }
        if (m == NULL && (m = lb_members_get(d, p->name)) == NULL) {
            lb_log(CONF_LOG_ERROR, "discover_failed", "pool=%s error=\"out of memory\"", p->name);
            continue;
        }
        m->is_seen = true;
        if (lb_members_spec(p, &spec, err, sizeof(err)) != 0) {
            lb_log(CONF_LOG_ERROR, "discover_failed", "pool=%s error=%s", p->name,
                   lb_log_quote(qbuf, sizeof(qbuf), err));
            continue;
        }
        if (m->dsc != NULL && dsc_spec_equal(dsc_spec_of(m->dsc), &spec))
            continue;
        dsc_free(m->dsc);
        if ((m->dsc = dsc_new(d->base, &spec, lb_members_on_result, m)) == NULL ||
            dsc_start(m->dsc) != 0) {
            dsc_free(m->dsc);
            m->dsc = NULL;
            lb_log(CONF_LOG_ERROR, "discover_failed", "pool=%s error=\"cannot start\"", p->name);
        }
    }
    for (size_t i = 0; i < d->reload->nmembers;) {
        if (!d->reload->members[i]->is_seen) {
            lb_members_free(d->reload->members[i]);
            d->reload->members[i] = d->reload->members[--d->reload->nmembers];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&d->state_lock);
    if (is_dropped)
        event_active(d->reload->members_ev, EV_READ, 0);
}

/* ---------------------------------------------------- ephemeral servers */

/* How often the ephemeral servers' silence is looked at: a server goes
 * ephemeral_delete_after to that + LB_EPHEMERAL_SWEEP_MS after its last
 * heartbeat. */
#define LB_EPHEMERAL_SWEEP_MS 100

/* Deletes the ephemeral servers silent for their pool's
 * ephemeral_delete_after: out of rotation at once (already, since
 * heartbeat_ttl), drained, then gone, with one decision per pool and one
 * members reload for all. None while min_servers' guard holds a server of
 * the pool and no ephemeral server of it heartbeats: when a whole pool
 * goes silent at once, the lost heartbeats (a partition between the
 * instances and lb) are likelier than the loss of every instance, and a
 * floor that is a share of the pool would shrink with each deletion until
 * one server was left. One that still heartbeats shows the way to lb is
 * open: the silent ones are gone (a scale-down), and go. */
static size_t
lb_members_sweep_pool(struct lb_daemon *d, struct lb_pool *pool, uint64_t now)
{
    uint64_t after = pool->conf->ephemeral_delete_after_ms;
    struct lb_server *first = NULL;
    uint64_t ttl = pool->conf->heartbeat_ttl_ms;
    bool is_guarded = false, is_heard = false;
    size_t deleted = 0;
    char reason[96];

    for (size_t k = 0; k < pool->conf->nservers; k++) {
        const struct lb_server *srv = &pool->servers[k];
        const struct lb_backend *b = srv->b;

        is_guarded |= b->is_guarded;
        is_heard |= srv->conf->is_ephemeral && b->heartbeats > 0 && b->beat_at_ms != 0 &&
                    now - b->beat_at_ms < ttl;
    }
    is_guarded &= !is_heard;
    for (size_t k = 0; k < pool->conf->nservers; k++) {
        struct lb_server *srv = &pool->servers[k];
        struct lb_backend *b = srv->b;

        if (!srv->conf->is_ephemeral || b->op.is_api_removed || b->beat_at_ms == 0 ||
            now - b->beat_at_ms < after)
            continue;
        if (is_guarded) {
            if (!b->is_delete_held)
                lb_log(CONF_LOG_WARN, "ephemeral_delete_held", "pool=%s server=%s "
                       "silent_ms=%llu reason=\"guard: min_servers holds servers of the pool, "
                       "and none heartbeats\"",
                       pool->conf->name, srv->conf->name,
                       (unsigned long long)(now - b->beat_at_ms));
            b->is_delete_held = true;
            continue;
        }
        lb_log(CONF_LOG_WARN, "ephemeral_delete", "pool=%s server=%s addr=%s silent_ms=%llu",
               pool->conf->name, srv->conf->name, srv->conf->addr.text,
               (unsigned long long)(now - b->beat_at_ms));
        lb_server_mark_deleted(srv);
        (void)lb_members_api_remove(d, pool->conf->name, srv->conf->name);
        first = first != NULL ? first : srv;
        deleted++;
    }
    if (first != NULL) {
        snprintf(reason, sizeof(reason), "ephemeral: no heartbeat for %llu ms",
                 (unsigned long long)after);
        lb_pool_decide_deleted(d, pool, first, reason);
    }
    return deleted;
}

static void
lb_members_on_sweep(evutil_socket_t fd, short what, void *arg)
{
    struct lb_daemon *d = arg;
    uint64_t now = lb_mono_ms();
    size_t deleted = 0;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < d->gen->conf->npools; i++) {
        if (d->gen->pools[i].conf->heartbeat_ttl_ms > 0)
            deleted += lb_members_sweep_pool(d, &d->gen->pools[i], now);
    }
    pthread_mutex_unlock(&d->state_lock);
    if (deleted > 0 && !lb_tier_is_stopping(d))
        lb_reload_members(d, "ephemeral");
}

static void
lb_members_on_changed(evutil_socket_t fd, short what, void *arg)
{
    struct lb_daemon *d = arg;

    if (!lb_tier_is_stopping(d))   /* stopping: the pools stay as they are */
        lb_reload_members(d, "discover");
}

int
lb_members_init(struct lb_daemon *d)
{
    struct timeval every = lb_tv_ms(LB_EPHEMERAL_SWEEP_MS);

    d->reload->members_ev = event_new(d->base, -1, 0, lb_members_on_changed, d);
    d->reload->sweep_ev = event_new(d->base, -1, EV_PERSIST, lb_members_on_sweep, d);
    if (d->reload->members_ev == NULL || d->reload->sweep_ev == NULL)
        return -1;
    return event_add(d->reload->sweep_ev, &every);
}

void
lb_members_fini(struct lb_daemon *d)
{
    for (size_t i = 0; i < d->reload->nmembers; i++)
        lb_members_free(d->reload->members[i]);
    free(d->reload->members);
    d->reload->members = NULL;
    d->reload->nmembers = 0;
    if (d->reload->members_ev != NULL)
        event_free(d->reload->members_ev);
    d->reload->members_ev = NULL;
    if (d->reload->sweep_ev != NULL)
        event_free(d->reload->sweep_ev);
    d->reload->sweep_ev = NULL;
}

/* ------------------------------------------------------- hand-over */

/* A member or weight line (bal_lines.h):
 *   member api|dns POOL NAME ADDR WEIGHT MAXCONN
 *   weight POOL NAME WEIGHT */
enum lb_members_source {
    LB_MEMBERS_API = 0,
    LB_MEMBERS_DNS,
    LB_MEMBERS_EPHEMERAL,               /* an API member that heartbeats */
};

struct lb_members_line {
    enum lb_members_source source;      /* member lines */
    char pool[CONF_NAME_MAX + 1];
    struct lb_member mb;                /* weight lines: name and weight */
};

static const char *const lb_members_sources[] = {
    [LB_MEMBERS_API] = "api", [LB_MEMBERS_DNS] = "dns", [LB_MEMBERS_EPHEMERAL] = "ephemeral",
};

static const struct bal_line_field lb_members_member_fields[] = {
    BAL_LINE_ENUM_FIELD("source", struct lb_members_line, source, lb_members_sources),
    BAL_LINE_WORD_FIELD("pool", struct lb_members_line, pool),
    BAL_LINE_WORD_FIELD("name", struct lb_members_line, mb.name),
    BAL_LINE_WORD_FIELD("address", struct lb_members_line, mb.address),
    BAL_LINE_UINT_FIELD("weight", struct lb_members_line, mb.weight, 0, UINT32_MAX),
    BAL_LINE_UINT_FIELD("max_connections", struct lb_members_line, mb.max_connections, 0,
                        UINT32_MAX),
};
static const struct bal_line_kind lb_members_member_kind =
    BAL_LINE_KIND("member", lb_members_member_fields);

static const struct bal_line_field lb_members_weight_fields[] = {
    BAL_LINE_WORD_FIELD("pool", struct lb_members_line, pool),
    BAL_LINE_WORD_FIELD("name", struct lb_members_line, mb.name),
    BAL_LINE_UINT_FIELD("weight", struct lb_members_line, mb.weight, 0, UINT32_MAX),
};
static const struct bal_line_kind lb_members_weight_kind =
    BAL_LINE_KIND("weight", lb_members_weight_fields);

/* One line of pool's member mb into t; -1 when out of memory. A member
 * that makes no line the new process reads is left out. */
static int
lb_members_put(struct lb_text *t, const struct bal_line_kind *k, enum lb_members_source source,
               const char *pool, const struct lb_member *mb)
{
    struct lb_members_line l = { .source = source, .mb = *mb };
    char *at = lb_text_room(t, LB_STATE_LINE_MAX);

    if (at == NULL)
        return -1;
    snprintf(l.pool, sizeof(l.pool), "%s", pool);
    t->len += bal_line_format(at, LB_STATE_LINE_MAX, k, &l);
    return 0;
}

char *
lb_members_text(struct lb_daemon *d, size_t *len)
{
    struct lb_text t = { 0 };
    int rc = 0;

    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; rc == 0 && i < d->reload->nmembers; i++) {
        const struct lb_members *m = d->reload->members[i];

        for (size_t k = 0; rc == 0 && k < m->napi; k++)
            rc = lb_members_put(&t, &lb_members_member_kind,
                                m->api[k].is_ephemeral ? LB_MEMBERS_EPHEMERAL : LB_MEMBERS_API,
                                m->pool, &m->api[k]);
        for (size_t k = 0; rc == 0 && k < m->ndns; k++)
            rc = lb_members_put(&t, &lb_members_member_kind, LB_MEMBERS_DNS, m->pool, &m->dns[k]);
        for (size_t k = 0; rc == 0 && k < m->nweights; k++)
            rc = lb_members_put(&t, &lb_members_weight_kind, 0, m->pool, &m->weights[k]);
    }
    pthread_mutex_unlock(&d->state_lock);
    return lb_text_take(&t, len);
}

int
lb_members_adopt(struct lb_daemon *d, const char *line, char *err, size_t errlen)
{
    bool is_member = bal_line_is(line, &lb_members_member_kind);
    struct lb_members_line l = { 0 };
    struct lb_member **list;
    struct lb_members *m;
    size_t *n;
    char why[160];

    if (!is_member && !bal_line_is(line, &lb_members_weight_kind)) {
        snprintf(err, errlen, "not a member or weight line: %.80s", line);
        return -1;
    }
    if (bal_line_parse(line, is_member ? &lb_members_member_kind : &lb_members_weight_kind, &l,
                       why, sizeof(why)) == -1) {
        snprintf(err, errlen, "%s line \"%.80s\": %s", is_member ? "member" : "weight", line,
                 why);
        return -1;
    }
    if ((m = lb_members_get(d, l.pool)) != NULL) {
        bool is_api = l.source != LB_MEMBERS_DNS;

        l.mb.is_ephemeral = l.source == LB_MEMBERS_EPHEMERAL;
        list = !is_member ? &m->weights : is_api ? &m->api : &m->dns;
        n = !is_member ? &m->nweights : is_api ? &m->napi : &m->ndns;
        if (lb_members_push(list, n, &l.mb) == 0)
            return 0;
    }
    snprintf(err, errlen, "out of memory");
    return -1;
}

const struct lb_members *
lb_members_of(const struct lb_daemon *d, const char *pool)
{
    return lb_members_find((struct lb_daemon *)d, pool);
}
