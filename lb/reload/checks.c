/*
 * checks.c - the link between the health module and server state: which
 * servers are checked and how (specs from the generation), and the results
 * that come back.
 *
 * Results arrive on main's results mailbox, in batches, and are applied
 * under state_lock (server.c). The module itself is published to the
 * workers, which ask it for out-of-schedule probes, only once it is built
 * and running: a reload that adds the first checked pool never shows them
 * a module still being filled.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "reload.h"
#include "reload_int.h"
#include "state.h"

static void
lb_health_on_results(void *msgs, size_t n, void *arg)
{
    struct lb_daemon *d = arg;
    const struct hc_result *results = msgs;

    pthread_mutex_lock(&d->state_lock);
    for (size_t i = 0; i < n; i++) {
        struct lb_gen *g = d->gen;

        struct lb_server *srv = results[i].id < g->nby_id ? g->by_id[results[i].id] : NULL;

        if (srv != NULL && srv->b->has_agent_id && results[i].id == srv->b->agent_id)
            lb_server_apply_agent(d, srv, &results[i]);
        else if (srv != NULL)
            lb_server_apply_check(d, srv, &results[i]);
    }
    pthread_mutex_unlock(&d->state_lock);
    lb_reload_warm_check(d, false);     /* a first probe may end a warm-up */
}

static void
lb_health_spec(struct hc_spec *spec, const struct lb_server *srv)
{
    const struct conf_pool *pc = srv->pool->conf;

    memset(spec, 0, sizeof(*spec));
    spec->id = srv->b->id;
    spec->kind = pc->check;
    spec->send_proxy = hc_check_send_proxy(pc->check_send_proxy, srv->conf->send_proxy);
    memcpy(&spec->addr, &srv->conf->addr.sa, srv->conf->addr.len);
    spec->addr_len = srv->conf->addr.len;
    if (pc->check_port != 0) {
        if (spec->addr.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&spec->addr)->sin6_port = htons((uint16_t)pc->check_port);
        else
            ((struct sockaddr_in *)&spec->addr)->sin_port = htons((uint16_t)pc->check_port);
    }
    spec->host = pc->check_host[0] != '\0' ? pc->check_host : srv->conf->addr.text;
    spec->path = pc->check_path;
    spec->expect = pc->check_expect;
    spec->warn = pc->check_warn;
    spec->interval_ms = pc->check_interval_ms;
    spec->timeout_ms = pc->check_timeout_ms;
    spec->verify = pc->check_verify;
    spec->ca = pc->check_ca;
    spec->reuse = pc->check_reuse;
    spec->user = pc->check_user;
    spec->database = pc->check_database;
    spec->role = pc->check_role;
    spec->grpc_service = pc->check_grpc_service;
    spec->tls = pc->check_tls;
    spec->dns_name = pc->check_dns_name;
    spec->dns_type = pc->check_dns_type;
    spec->dns_rcodes = pc->check_dns_rcodes;
    spec->send = pc->check_send.v;
    spec->send_len = pc->check_send.len;
    spec->expect_bytes = pc->check_expect_bytes.v;
    spec->expect_bytes_len = pc->check_expect_bytes.len;
    spec->is_known = srv->b->is_handed_over;
}

/* A server's agent: a TCP connection to its agent_port, on the agent's
 * own schedule, without the check's PROXY header (an agent is not the
 * service: HAProxy's agent-check sends none either). */
static void
lb_agent_spec(struct hc_spec *spec, const struct lb_server *srv)
{
    const struct conf_pool *pc = srv->pool->conf;
    uint16_t port = htons((uint16_t)srv->conf->agent_port);

    lb_health_spec(spec, srv);          /* the address and the strings */
    spec->id = srv->b->agent_id;
    spec->is_agent = true;
    spec->kind = CONF_CHECK_TCP;
    spec->send_proxy = CONF_PROXY_OFF;
    spec->tls = false;
    spec->reuse = false;
    if (spec->addr.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&spec->addr)->sin6_port = port;
    else
        ((struct sockaddr_in *)&spec->addr)->sin_port = port;
    spec->interval_ms = pc->agent_interval_ms;
    spec->timeout_ms = pc->agent_timeout_ms;
    spec->send = pc->agent_send.v;
    spec->send_len = pc->agent_send.len;
}

/* The check specs of every checked server of g, and of every agent; *out
 * is malloc'd. */
static ssize_t
lb_health_specs(const struct lb_gen *g, struct hc_spec **out)
{
    struct hc_spec *specs = calloc(g->nservers ? 2 * g->nservers : 1, sizeof(*specs));
    size_t n = 0;

    if (specs == NULL)
        return -1;
    for (size_t i = 0; i < g->nservers; i++) {
        if (g->servers[i]->pool->conf->check != CONF_CHECK_NONE)
            lb_health_spec(&specs[n++], g->servers[i]);
        if (g->servers[i]->conf->agent_port != 0)
            lb_agent_spec(&specs[n++], g->servers[i]);
    }
    *out = specs;
    return (ssize_t)n;
}

/* Creates and starts the health module for the specs (the first time a
 * generation has checked servers). */
static int
lb_health_create(struct lb_daemon *d, const struct lb_gen *g, const struct hc_spec *specs,
                 size_t n, char *err, size_t errlen)
{
    struct hc *hc = NULL;
    sigset_t old;
    char herr[200];
    int rc;

    d->results = lb_mailbox_new(d->base, sizeof(struct hc_result), lb_health_on_results, d);
    if (d->results != NULL)
        hc = hc_new(g->conf->health.threads, d->results, herr, sizeof(herr));
    if (hc == NULL) {
        snprintf(err, errlen, "health checks: %s", d->results != NULL ? herr : "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        if (hc_add(hc, &specs[i], herr, sizeof(herr)) == -1) {
            const struct lb_server *srv = g->by_id[specs[i].id];

            snprintf(err, errlen, "pool %s server %s: %s", srv->pool->conf->name,
                     srv->conf->name, herr);
            goto fail;
        }
    }
    lb_signals_block(&old);
    rc = hc_start(hc);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == -1) {
        snprintf(err, errlen, "health checks: cannot start threads");
        goto fail;
    }
    /* Built and running: now the workers may see it. */
    atomic_store_explicit(&d->hc, hc, memory_order_release);
    lb_log(CONF_LOG_INFO, "health_start", "threads=%u servers=%zu",
           g->conf->health.threads, n);
    return 0;
fail:
    hc_free(hc);
    lb_mailbox_free(d->results, NULL, NULL);
    d->results = NULL;
    return -1;
}

int
lb_health_start(struct lb_daemon *d, const struct lb_gen *g, char *err, size_t errlen)
{
    struct hc_spec *specs;
    ssize_t n = lb_health_specs(g, &specs);
    char herr[200];
    int rc = 0;

    if (n < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct hc *hc = atomic_load_explicit(&d->hc, memory_order_relaxed);  /* main's own */

    if (hc == NULL && n > 0)
        rc = lb_health_create(d, g, specs, (size_t)n, err, errlen);
    else if (hc != NULL && hc_update(hc, specs, (size_t)n, herr, sizeof(herr)) == -1) {
        snprintf(err, errlen, "health checks: %s", herr);
        rc = -1;
    }
    free(specs);
    return rc;
}

/* After the workers' loops ended: nobody asks the module for probes. */
void
lb_health_stop(struct lb_daemon *d)
{
    hc_free(atomic_exchange(&d->hc, NULL));
    lb_mailbox_free(d->results, NULL, NULL);
    d->results = NULL;
}
