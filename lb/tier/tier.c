/*
 * tier.c - readiness and the withdrawal: what a routing layer in front of
 * a tier of lb nodes asks (/ready) and what it is given time for (SIGTERM,
 * withdraw_delay) before the node stops accepting.
 *
 *   serving --SIGTERM--> withdrawing --withdraw_delay--> stopping --> exit
 *      |                     |  (second signal)            ^
 *      +--SIGINT, or delay 0-+-----------------------------+
 *
 * /ready says 503 from the first SIGTERM on (and after a hand-over), so
 * the routing layer moves the traffic away while lb still serves it.
 *
 * /ready is an output of main's decisions, not a policy of the HTTP
 * handler: main works the verdict out after each decision, generation
 * swap, withdrawal and hand-over (lb_tier_publish) and publishes it; the
 * admin thread only reads it (lb_tier_ready). Main thread, but for
 * lb_tier_ready.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "daemon.h"
#include "data.h"
#include "state_types.h"
#include "tier.h"

/* Who owns it: main allocates it (lb_tier_init) and frees it after the
 * admin port stopped. Events and is_withdrawn: main only. */
struct lb_tier {
    struct event *shutdown_timer_ev;    /* shutdown_timeout, once stopping */
    struct event *withdraw_ev;          /* withdraw_delay, once withdrawing */
    bool is_withdrawn;                  /* a SIGTERM came, or a hand-over */
    /* The published verdict: main writes both under state_lock; the flag
     * is read without it when ready, the reasons under it. */
    _Atomic bool is_ready;
    struct lb_text reasons;             /* one line each, in order */
};

int
lb_tier_init(struct lb_daemon *d)
{
    d->tier = calloc(1, sizeof(*d->tier));
    return d->tier != NULL ? 0 : -1;
}

void
lb_tier_fini(struct lb_daemon *d)
{
    struct lb_tier *t = d->tier;

    if (t == NULL)
        return;
    if (t->shutdown_timer_ev != NULL)
        event_free(t->shutdown_timer_ev);
    if (t->withdraw_ev != NULL)
        event_free(t->withdraw_ev);
    free(t->reasons.p);
    free(t);
    d->tier = NULL;
}

static void lb_tier_withdrawn(struct lb_daemon *d);

static void
lb_tier_on_shutdown_timeout(evutil_socket_t fd, short what, void *arg)
{
    lb_workers_post(arg, LB_WORKER_FORCE);
}

void
lb_tier_stop(struct lb_daemon *d, const char *signame)
{
    struct lb_tier *t = d->tier;
    struct timeval tv;
    uint64_t ms = d->gen->conf->global.shutdown_timeout_ms;

    lb_log(CONF_LOG_INFO, "shutdown", "signal=%s active=%u shutdown_timeout_ms=%llu", signame,
           atomic_load(&d->limit.active), (unsigned long long)ms);
    /* After a hand-over the service is the new process's: not stopping. */
    if (!d->is_handed_over && lb_net_notify("STOPPING=1") == -1)
        lb_log(CONF_LOG_WARN, "notify_failed", "error=\"%s\"", strerror(errno));
    /* After a hand-over the listening sockets live on in the new process,
     * which accepts what their queues hold. */
    lb_workers_post(d, d->is_handed_over ? LB_WORKER_STOP_HANDED_OVER : LB_WORKER_STOP);
    t->shutdown_timer_ev = evtimer_new(d->base, lb_tier_on_shutdown_timeout, d);
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    if (t->shutdown_timer_ev == NULL || evtimer_add(t->shutdown_timer_ev, &tv) == -1)
        lb_tier_on_shutdown_timeout(-1, 0, d);  /* cannot wait: close now */
}

static void
lb_tier_on_withdrawn(evutil_socket_t fd, short what, void *arg)
{
    lb_tier_stop(arg, "SIGTERM");
}

void
lb_tier_on_signal(struct lb_daemon *d, int sig)
{
    struct lb_tier *t = d->tier;
    uint64_t delay = d->gen->conf->global.withdraw_delay_ms;
    struct timeval tv = lb_tv_ms(delay);
    char name[16];

    snprintf(name, sizeof(name), "SIG%s", sigabbrev_np(sig));
    if (t->shutdown_timer_ev != NULL) {
        /* A second signal while draining: stop waiting, as a second Ctrl-C
         * would be expected to. */
        lb_log(CONF_LOG_WARN, "shutdown_forced", "signal=%s", name);
        lb_tier_on_shutdown_timeout(-1, 0, d);
        return;
    }
    lb_tier_withdrawn(d);                       /* /ready: 503 from now on */
    if (t->withdraw_ev != NULL) {
        /* A second signal while withdrawing: stop accepting now. */
        event_free(t->withdraw_ev);
        t->withdraw_ev = NULL;
        lb_tier_stop(d, name);
        return;
    }
    /* SIGTERM is what an orchestrator or systemd sends: give the routing
     * layer (BGP, VRRP, a load balancer in front) withdraw_delay to move
     * the traffic away while lb still serves. SIGINT, an operator at a
     * terminal, stops at once. */
    if (sig != SIGTERM || delay == 0) {
        lb_tier_stop(d, name);
        return;
    }
    lb_log(CONF_LOG_INFO, "withdraw", "signal=%s withdraw_delay_ms=%llu active=%u", name,
           (unsigned long long)delay, atomic_load(&d->limit.active));
    t->withdraw_ev = evtimer_new(d->base, lb_tier_on_withdrawn, d);
    if (t->withdraw_ev == NULL || evtimer_add(t->withdraw_ev, &tv) == -1)
        lb_tier_stop(d, name);
}

void
lb_tier_handed_over(struct lb_daemon *d)
{
    lb_tier_withdrawn(d);
}

bool
lb_tier_is_stopping(const struct lb_daemon *d)
{
    return d->tier != NULL && d->tier->shutdown_timer_ev != NULL;
}

bool
lb_tier_is_leaving(const struct lb_daemon *d)
{
    return d->tier != NULL &&
           (d->tier->shutdown_timer_ev != NULL || d->tier->withdraw_ev != NULL);
}

/* Ready while lb listens and every pool a frontend sends to has a server
 * in rotation (one the guard holds counts: the backends are shared by every
 * lb of a tier, so a failure that empties one node's pool empties them
 * all, and withdrawing every node would take the service off the network);
 * not ready from the first SIGTERM on. */
void
lb_tier_publish(struct lb_daemon *d)
{
    struct lb_tier *t = d->tier;
    bool is_ready = true;

    if (t == NULL || d->gen == NULL)
        return;                         /* before the start's first decision */
    /* The text keeps its room: a decision does not allocate once it has
     * grown (out of memory it starts over at the next one). */
    if (t->reasons.is_failed) {
        free(t->reasons.p);
        t->reasons = (struct lb_text){ 0 };
    }
    t->reasons.len = 0;
    if (t->is_withdrawn) {
        (void)lb_text_printf(&t->reasons, "%s\n",
                             "stopping: a SIGTERM came (withdraw_delay, then the drain)");
        is_ready = false;
    }
    for (size_t i = 0; i < d->gen->conf->npools; i++) {
        const struct lb_pool *p = &d->gen->pools[i];
        bool is_used = false, has_server = false;

        for (size_t k = 0; k < d->gen->conf->nfrontends && !is_used; k++)
            is_used = d->gen->frontends[k].pool == p;
        for (size_t k = 0; k < p->conf->nservers && !has_server; k++)
            has_server = bal_server_in_rotation(p->bal, k);
        if (!is_used || has_server)
            continue;
        (void)lb_text_printf(&t->reasons, "pool %s: no server in rotation\n", p->conf->name);
        is_ready = false;
    }
    atomic_store(&t->is_ready, is_ready);
}

/* A SIGTERM came, or a new process took over: published at once. */
static void
lb_tier_withdrawn(struct lb_daemon *d)
{
    pthread_mutex_lock(&d->state_lock);
    d->tier->is_withdrawn = true;
    lb_tier_publish(d);
    pthread_mutex_unlock(&d->state_lock);
}

bool
lb_tier_ready(struct lb_daemon *d, lb_tier_reason_pt reason, void *arg)
{
    struct lb_tier *t = d->tier;
    bool is_ready;

    if (atomic_load(&t->is_ready))
        return true;
    pthread_mutex_lock(&d->state_lock);
    is_ready = atomic_load(&t->is_ready);
    for (size_t at = 0; !is_ready && at < t->reasons.len;) {
        char *end = memchr(t->reasons.p + at, '\n', t->reasons.len - at);

        *end = '\0';                   /* for the call; put back below */
        reason(arg, t->reasons.p + at);
        *end = '\n';
        at = (size_t)(end - t->reasons.p) + 1;
    }
    pthread_mutex_unlock(&d->state_lock);
    return is_ready;
}
