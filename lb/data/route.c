/*
 * route.c - TLS passthrough routed by name: which pool a client of a
 * frontend with route lines goes to, once its first bytes were read
 * (session.c), and the counts and log lines of that choice.
 *
 * Nothing here holds the client's bytes: the session peeks at them and
 * leaves them in the kernel for the server, so choosing costs no memory
 * per connection (README, "Routing TLS by name").
 */
#include <stdatomic.h>

#include "data.h"
#include "lb_enum.h"
#include "state.h"

static const char *const lb_route_fallback_names[] = {
    [LB_ROUTE_NO_SNI] = "no_sni", [LB_ROUTE_NO_MATCH] = "no_match",
    [LB_ROUTE_UNROUTABLE] = "unroutable",
};
LB_ENUM_NAME(lb_route_fallback_name, enum lb_route_fallback, lb_route_fallback_names, "unknown")

/* Plain HTTP or a scanner on a TLS port is one line per client at most,
 * as the other per-client events. */
static struct lb_log_limit lb_unroutable_limit = LB_LOG_LIMIT(LB_LOG_CLIENT_EVENTS_PER_S);

static struct lb_pool *
lb_route_fallback(struct lb_frontend *fe, enum lb_route_fallback why, bool is_default)
{
    if (is_default && fe->default_pool != NULL) {
        atomic_fetch_add_explicit(&fe->stats->route_default[why], 1, memory_order_relaxed);
        return fe->default_pool;
    }
    atomic_fetch_add_explicit(&fe->stats->route_closed[why], 1, memory_order_relaxed);
    return NULL;
}

struct lb_pool *
lb_route_pick(struct lb_frontend *fe, const char *name)
{
    int i = conf_route_match(fe->conf, name);

    if (i < 0)
        return lb_route_fallback(fe, name[0] == '\0' ? LB_ROUTE_NO_SNI : LB_ROUTE_NO_MATCH,
                                 true);
    atomic_fetch_add_explicit(&fe->routes[i].stats->sessions, 1, memory_order_relaxed);
    return fe->routes[i].pool;
}

struct lb_pool *
lb_route_unroutable(struct lb_frontend *fe, const char *client_text, enum lb_sni_bad why,
                    bool is_empty)
{
    /* A client that closed before sending anything has nothing a server
     * could answer: it is closed whatever route_unknown says. */
    bool is_default = fe->conf->route_unknown == CONF_ROUTE_UNKNOWN_DEFAULT && !is_empty;
    struct lb_pool *pool = lb_route_fallback(fe, LB_ROUTE_UNROUTABLE, is_default);

    atomic_fetch_add_explicit(&fe->stats->sni_bad[why], 1, memory_order_relaxed);
    lb_log_limited(&lb_unroutable_limit, CONF_LOG_WARN, "sni_unroutable",
                   "frontend=%s client=%s reason=%s action=%s", fe->conf->name, client_text,
                   lb_sni_bad_name(why), pool != NULL ? "default" : "close");
    return pool;
}
