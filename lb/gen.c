/*
 * gen.c - the configuration generation: frontends, pools and servers built
 * from one read of the config file.
 *
 * Main builds it; workers and sessions hold references. It is immutable after
 * lb_gen_new apart from atomic counters and the balancer's rotation flags, so
 * readers need no lock. The last lb_gen_unref frees it: a reload will swap
 * the current pointer and let the old generation go with its last session.
 */
#include <stdlib.h>

#include "lb.h"

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

static int
lb_gen_pool_init(struct lb_pool *p, const struct conf_pool *cp, size_t index)
{
    size_t n = cp->nservers;
    uint32_t *weights = calloc(n ? n : 1, sizeof(*weights));
    const char **names = calloc(n ? n : 1, sizeof(*names));
    int rc = -1;

    p->conf = cp;
    p->index = index;
    p->servers = calloc(n ? n : 1, sizeof(*p->servers));
    p->guard_scratch = calloc(n ? n : 1, sizeof(*p->guard_scratch));
    if (weights == NULL || names == NULL || p->servers == NULL || p->guard_scratch == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        weights[i] = cp->servers[i].weight;
        names[i] = cp->servers[i].name;
        p->servers[i].conf = &cp->servers[i];
        p->servers[i].pool = p;
        p->servers[i].index = i;
        bal_health_init(&p->servers[i].health, cp->rise, cp->fall);
        p->servers[i].is_in_rotation = true;
    }
    p->in_rotation = n;
    p->bal = bal_pool_new(lb_gen_algo(cp->balance), n, weights, names);
    if (p->bal != NULL)
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
            bal_pool_free(g->pools[i].bal);
            free(g->pools[i].servers);
            free(g->pools[i].guard_scratch);
        }
    }
    free(g->pools);
    free(g->frontends);
    free(g->servers_by_id);
    conf_free(g->conf);
    free(g);
}

struct lb_gen *
lb_gen_new(struct conf *conf)
{
    struct lb_gen *g = calloc(1, sizeof(*g));

    if (g == NULL) {
        conf_free(conf);
        return NULL;
    }
    g->conf = conf;
    atomic_init(&g->refs, 1);
    g->pools = calloc(conf->npools ? conf->npools : 1, sizeof(*g->pools));
    g->frontends = calloc(conf->nfrontends ? conf->nfrontends : 1,
                          sizeof(*g->frontends));
    if (g->pools == NULL || g->frontends == NULL)
        goto fail;
    for (size_t i = 0; i < conf->npools; i++) {
        if (lb_gen_pool_init(&g->pools[i], &conf->pools[i], i) == -1)
            goto fail;
    }
    for (size_t i = 0; i < conf->npools; i++)
        g->nservers += conf->pools[i].nservers;
    g->servers_by_id = calloc(g->nservers ? g->nservers : 1, sizeof(*g->servers_by_id));
    if (g->servers_by_id == NULL)
        goto fail;
    for (size_t i = 0, id = 0; i < conf->npools; i++) {
        for (size_t k = 0; k < conf->pools[i].nservers; k++, id++) {
            g->pools[i].servers[k].id = (uint32_t)id;
            g->servers_by_id[id] = &g->pools[i].servers[k];
        }
    }
    for (size_t i = 0; i < conf->nfrontends; i++) {
        g->frontends[i].conf = &conf->frontends[i];
        g->frontends[i].pool = &g->pools[conf->frontends[i].pool_index];
    }
    return g;
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
