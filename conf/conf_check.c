/*
 * conf_check.c - the checks that need the whole file: required keys and
 * sections, duplicate names, references between sections, listen conflicts, and
 * relations between keys. They run after the defaults are merged.
 *
 * A key whose value was rejected is skipped here (lines->bad): its error
 * is already reported, and checking the default that stands in for it
 * would report the same cause twice.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "conf_keys.h"
#include "conf_parse.h"
#include "conf_value.h"

/* The name and line of element i of an array of frontends, pools or
 * servers: each struct has a char *name and an int line of its own. */
struct conf_named {
    const char *base;
    size_t n, size;
    size_t name_off, line_off;
};

#define CONF_NAMED(type, array, count)                                      \
    (struct conf_named){ (const char *)(array), (count), sizeof(type),      \
                         offsetof(type, name), offsetof(type, line) }

static void conf_check_required(struct conf_parse *p, int kind,
                                const char *name,
                                const struct conf_lines *lines);
static void conf_check_listen(struct conf_parse *p, size_t i, int line);
static void conf_check_accept_proxy(struct conf_parse *p, const struct conf_frontend *fe,
                                    const struct conf_lines *l);
static void conf_check_routes(struct conf_parse *p, struct conf_frontend *fe,
                              const struct conf_lines *l);
static void conf_check_udp(struct conf_parse *p, struct conf_frontend *fe,
                           const struct conf_lines *l);
static void conf_check_frontends(struct conf_parse *p);
static void conf_check_names(struct conf_parse *p, struct conf_named a, const char *what,
                             const char *where, const char *where_name);
static void conf_check_pools(struct conf_parse *p);
static void conf_check_global(struct conf_parse *p);

void
conf_check(struct conf_parse *p)
{
    conf_check_global(p);
    conf_check_frontends(p);
    conf_check_pools(p);
}

/* A UNIX socket's path fits in sun_path (108 bytes with its NUL). */
static void
conf_check_global(struct conf_parse *p)
{
    const char *path = p->c->global.control_socket;
    int k = conf_key_find(CONF_SECTION_GLOBAL, "control_socket");
    int line = p->single[CONF_SECTION_GLOBAL].key[k];

    if (line == 0 || p->single[CONF_SECTION_GLOBAL].bad[k])
        return;
    if (path[0] != '\0' && (path[0] != '/' || strpbrk(path, " \t") != NULL))
        conf_error(p, line, "control_socket: \"%s\" is not a path (it starts with / and has "
                   "no spaces)", path);
    else if (strlen(path) > 107)
        conf_error(p, line, "control_socket: %zu bytes, at most 107 (a UNIX socket's path)",
                   strlen(path));
}

/* Reported at the section header: the key is missing, so its line is. */
static void
conf_check_required(struct conf_parse *p, int kind, const char *name,
                    const struct conf_lines *lines)
{
    const struct conf_key *keys;
    size_t i, n;

    keys = conf_keys_of(kind, &n);
    for (i = 0; i < n; i++)
        if ((keys[i].flags & CONF_KEY_REQUIRED) && lines->key[i] == 0)
            conf_error(p, lines->header, "%s %s: %s is required",
                       conf_section_kind_name(kind), name, keys[i].name);
}

/* Two listeners on one port would both bind with SO_REUSEPORT and share
 * its connections; a wildcard takes the port on every address. */
static void
conf_check_listen(struct conf_parse *p, size_t i, int line)
{
    const struct conf_frontend *fe = &p->c->frontends[i];
    const struct conf_addr *a = &fe->listen;
    const struct conf_lines *admin = &p->single[CONF_SECTION_ADMIN];
    int klisten_fe = conf_key_find(CONF_SECTION_FRONTEND, "listen");
    int klisten_admin = conf_key_find(CONF_SECTION_ADMIN, "listen");
    size_t j;

    for (j = 0; j < i; j++) {
        const struct conf_frontend *other = &p->c->frontends[j];
        const struct conf_lines *ol = &p->frontend_lines[j];
        const struct conf_addr *b = &other->listen;

        /* TCP and UDP ports are two spaces: DNS serves both on :53 */
        if (ol->key[klisten_fe] == 0 || ol->bad[klisten_fe] ||
            other->protocol != fe->protocol || !conf_addr_overlaps(a, b))
            continue;
        if (a->len == b->len && memcmp(&a->ss, &b->ss, a->len) == 0)
            conf_error(p, line, "frontend %s: listen %s is already used by "
                       "frontend %s at line %d", fe->name, a->text,
                       other->name, ol->key[klisten_fe]);
        else
            conf_error(p, line, "frontend %s: listen %s overlaps listen %s "
                       "of frontend %s at line %d", fe->name, a->text,
                       b->text, other->name, ol->key[klisten_fe]);
        return;
    }
    if (!admin->bad[klisten_admin] && fe->protocol == CONF_PROTOCOL_TCP &&
        conf_addr_overlaps(a, &p->c->admin.listen)) {
        if (admin->key[klisten_admin] != 0)
            conf_error(p, line, "frontend %s: listen %s overlaps the [admin] "
                       "listen %s at line %d", fe->name, a->text,
                       p->c->admin.listen.text, admin->key[klisten_admin]);
        else
            conf_error(p, line, "frontend %s: listen %s overlaps the [admin] "
                       "listen %s (its default)", fe->name, a->text,
                       p->c->admin.listen.text);
    }
}

/* A header is read only from the balancers listed: from anyone, a client
 * could claim any address, and the ACLs and limits would judge the claim.
 * A list while no header is read is a mistake of one of the two keys. */
static void
conf_check_accept_proxy(struct conf_parse *p, const struct conf_frontend *fe,
                        const struct conf_lines *l)
{
    int kaccept = conf_key_find(CONF_SECTION_FRONTEND, "accept_proxy");
    int kfrom = conf_key_find(CONF_SECTION_FRONTEND, "accept_proxy_from");

    if (l->bad[kaccept] || l->bad[kfrom])
        return;
    if (fe->accept_proxy != CONF_PROXY_OFF && fe->accept_proxy_from.n == 0)
        conf_error(p, l->key[kaccept], "accept_proxy = %s needs accept_proxy_from: the "
                   "addresses of the balancers allowed to send a PROXY header",
                   conf_proxy_name(fe->accept_proxy));
    else if (fe->accept_proxy == CONF_PROXY_OFF && fe->accept_proxy_from.n > 0)
        conf_error(p, l->key[kfrom], "accept_proxy_from needs accept_proxy = v1, v2 or "
                   "any (with accept_proxy off, no PROXY header is read)");
}

static void
conf_check_pool_exists(struct conf_parse *p, const struct conf_frontend *fe, int line,
                       const char *name, size_t *index)
{
    for (size_t j = 0; j < p->c->npools; j++) {
        if (strcmp(p->c->pools[j].name, name) == 0) {
            *index = j;
            return;
        }
    }
    conf_error(p, line, "frontend %s: pool \"%s\" does not exist", fe->name, name);
}

/* A frontend sends its clients to one pool, or routes them by name: the
 * keys of routing mean nothing without route lines. */
static void
conf_check_routes(struct conf_parse *p, struct conf_frontend *fe, const struct conf_lines *l)
{
    static const char *const route_keys[] = {
        "default_pool", "route_unknown", "sni_max_bytes", "sni_timeout"
    };
    int kpool = conf_key_find(CONF_SECTION_FRONTEND, "pool");
    int kroute = conf_key_find(CONF_SECTION_FRONTEND, "route");
    int kdefault = conf_key_find(CONF_SECTION_FRONTEND, "default_pool");
    int kunknown = conf_key_find(CONF_SECTION_FRONTEND, "route_unknown");
    struct conf_routes *r = &fe->routes;

    if (l->key[kpool] != 0 && l->key[kroute] != 0) {
        conf_error(p, l->key[kroute], "frontend %s: route lines and pool (line %d) exclude "
                   "each other: a frontend routes by name, or sends every client to its "
                   "pool", fe->name, l->key[kpool]);
        return;
    }
    if (l->key[kpool] == 0 && l->key[kroute] == 0) {
        conf_error(p, l->header, "frontend %s: pool is required (or route lines)", fe->name);
        return;
    }
    if (l->key[kroute] == 0) {
        for (size_t i = 0; i < sizeof(route_keys) / sizeof(route_keys[0]); i++) {
            int k = conf_key_find(CONF_SECTION_FRONTEND, route_keys[i]);

            if (l->key[k] != 0)
                conf_error(p, l->key[k], "frontend %s: %s applies to route lines, and "
                           "the frontend has none", fe->name, route_keys[i]);
        }
        return;
    }
    conf_routes_sort(r);
    for (size_t i = 0; i < r->n; i++) {
        if (i > 0 && strcmp(r->v[i].pattern, r->v[i - 1].pattern) == 0)
            conf_error(p, r->v[i].line, "frontend %s: route %s is already routed at line "
                       "%d (patterns compare without case and trailing dot)", fe->name,
                       r->v[i].pattern, r->v[i - 1].line);
        conf_check_pool_exists(p, fe, r->v[i].line, r->v[i].pool_name, &r->v[i].pool_index);
    }
    if (fe->default_pool != NULL && !l->bad[kdefault])
        conf_check_pool_exists(p, fe, l->key[kdefault], fe->default_pool,
                               &fe->default_pool_index);
    if (fe->default_pool == NULL && l->key[kunknown] != 0 && !l->bad[kunknown] &&
        fe->route_unknown == CONF_ROUTE_UNKNOWN_DEFAULT)
        conf_error(p, l->key[kunknown], "frontend %s: route_unknown = default needs "
                   "default_pool", fe->name);
}

/* The keys of each protocol mean nothing under the other: a UDP frontend
 * reads no stream (no PROXY header, no ClientHello) and keeps flows, not
 * connections, per source. */
static void
conf_check_udp(struct conf_parse *p, struct conf_frontend *fe, const struct conf_lines *l)
{
    static const char *const udp_keys[] = {
        "udp_idle_timeout", "udp_responses", "udp_max_flows", "log_flows"
    };
    static const char *const tcp_keys[] = {
        "route", "default_pool", "route_unknown", "sni_max_bytes", "sni_timeout",
        "accept_proxy", "accept_proxy_from", "accept_proxy_timeout",
        "max_connections_per_source", "rate_per_source", "source_table_size",
        "source_ipv6_prefix"
    };
    bool is_udp = fe->protocol == CONF_PROTOCOL_UDP;
    const char *const *keys = is_udp ? tcp_keys : udp_keys;
    size_t n = is_udp ? sizeof(tcp_keys) / sizeof(tcp_keys[0])
                      : sizeof(udp_keys) / sizeof(udp_keys[0]);

    for (size_t i = 0; i < n; i++) {
        int k = conf_key_find(CONF_SECTION_FRONTEND, keys[i]);

        if (l->key[k] != 0)
            conf_error(p, l->key[k], "frontend %s: %s applies to protocol = %s frontends, "
                       "and this one is %s", fe->name, keys[i], is_udp ? "tcp" : "udp",
                       conf_protocol_name(fe->protocol));
    }
}

static void
conf_check_frontends(struct conf_parse *p)
{
    struct conf *c = p->c;
    int kpool = conf_key_find(CONF_SECTION_FRONTEND, "pool");
    int klisten = conf_key_find(CONF_SECTION_FRONTEND, "listen");
    size_t i;

    /* Valid INI, but useless, and the likely shape of a file cut short
     * while it was written ([global] comes first): a reload would close
     * every listener. (An empty file has its own message.) */
    if (c->nfrontends == 0 && p->has_content)
        conf_error(p, 0, "no [frontend NAME] section: lb would listen on "
                   "nothing");
    conf_check_names(p, CONF_NAMED(struct conf_frontend, c->frontends, c->nfrontends),
                     "frontend", "", "");
    for (i = 0; i < c->nfrontends; i++) {
        struct conf_frontend *fe = &c->frontends[i];
        const struct conf_lines *l = &p->frontend_lines[i];

        conf_check_required(p, CONF_SECTION_FRONTEND, fe->name, l);
        fe->listen_line = l->key[klisten];
        if (l->key[klisten] != 0 && !l->bad[klisten])
            conf_check_listen(p, i, l->key[klisten]);
        conf_check_udp(p, fe, l);
        conf_check_accept_proxy(p, fe, l);
        conf_check_routes(p, fe, l);
        if (fe->pool_name == NULL || l->bad[kpool])
            continue;
        conf_check_pool_exists(p, fe, l->key[kpool], fe->pool_name, &fe->pool_index);
    }
}

static const char *
conf_named_name(const struct conf_named *a, size_t i)
{
    return *(char *const *)(a->base + i * a->size + a->name_off);
}

static int
conf_named_line(const struct conf_named *a, size_t i)
{
    return *(const int *)(a->base + i * a->size + a->line_off);
}

/* qsort context: conf is single-threaded per call, but qsort has no
 * argument, hence the pointer to the array being sorted. */
static _Thread_local const struct conf_named *conf_check_sorting;

static int
conf_check_cmp_named(const void *a, const void *b)
{
    size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
    int c = strcmp(conf_named_name(conf_check_sorting, ia),
                   conf_named_name(conf_check_sorting, ib));

    return c != 0 ? c : (ia > ib) - (ia < ib);
}

/* Duplicate names among the frontends, the pools or one pool's servers,
 * each reported at its own line against the first definition:
 * 'WHAT "NAME" is already defined at line N[WHERE WHERE_NAME]'. Sorted,
 * not compared pairwise: a pool of 10,000 servers would otherwise cost 50
 * million comparisons on every load and reload. */
static void
conf_check_names(struct conf_parse *p, struct conf_named a, const char *what,
                 const char *where, const char *where_name)
{
    size_t *order = malloc((a.n ? a.n : 1) * sizeof(*order));

    if (order == NULL) {
        conf_error(p, 0, "out of memory");
        return;
    }
    for (size_t i = 0; i < a.n; i++)
        order[i] = i;
    conf_check_sorting = &a;
    qsort(order, a.n, sizeof(*order), conf_check_cmp_named);
    for (size_t k = 1, first = 0; k < a.n; k++) {
        const char *name = conf_named_name(&a, order[k]);

        if (strcmp(name, conf_named_name(&a, order[first])) != 0) {
            first = k;
            continue;
        }
        conf_error(p, conf_named_line(&a, order[k]), "%s \"%s\" is already defined at "
                   "line %d%s%s", what, name, conf_named_line(&a, order[first]), where,
                   where_name);
    }
    conf_check_sorting = NULL;
    free(order);
}

/* A DNS name as discover_name takes it: 1 to 253 characters of labels of
 * 1 to 63 letters, digits, '-' and '_' (SRV names start with one), an
 * optional final dot. */
static bool
conf_dns_name_is_valid(const char *s)
{
    char lower[CONF_HOST_MAX + 1];

    return conf_host_normalise(s, strlen(s), lower);
}

/* discover = etcd: a prefix, URLs that parse, a user and a password
 * together, a CA only for https. */
static void
conf_check_etcd(struct conf_parse *p, const struct conf_pool *pool, const struct conf_lines *l,
                int line)
{
    int kurls = conf_key_find(CONF_SECTION_POOL, "discover_endpoints");
    int kuser = conf_key_find(CONF_SECTION_POOL, "discover_user");
    int kpass = conf_key_find(CONF_SECTION_POOL, "discover_password");
    int kca = conf_key_find(CONF_SECTION_POOL, "discover_tls_ca");
    struct conf_endpoint urls[CONF_ENDPOINTS_MAX];
    char err[CONF_HOST_MAX + 160];
    bool is_tls = false;
    int n;

    if (pool->discover_prefix[0] == '\0')
        conf_error(p, line, "pool %s: discover = etcd needs discover_prefix (e.g. "
                   "/services/%s/)", pool->name, pool->name);
    n = conf_endpoints_parse(pool->discover_endpoints, urls, CONF_ENDPOINTS_MAX, err,
                             sizeof(err));
    if (n < 0)
        conf_error(p, l->key[kurls] ? l->key[kurls] : line, "discover_endpoints: %s", err);
    for (int i = 0; i < n; i++)
        is_tls |= urls[i].is_tls;
    if ((pool->discover_user[0] == '\0') != (pool->discover_password[0] == '\0'))
        conf_error(p, l->key[kuser] ? l->key[kuser] : l->key[kpass],
                   "pool %s: discover_user and discover_password go together", pool->name);
    if (pool->discover_tls_ca[0] != '\0' && n > 0 && !is_tls)
        conf_error(p, l->key[kca], "discover_tls_ca needs an https:// URL in discover_endpoints");
}

static void
conf_check_discover(struct conf_parse *p, const struct conf_pool *pool,
                    const struct conf_lines *l)
{
    static const char *const dns_keys[] = { "discover_name", "discover_port",
                                            "discover_resolver", "discover_interval", NULL };
    static const char *const etcd_keys[] = { "discover_endpoints", "discover_prefix",
                                             "discover_user", "discover_password",
                                             "discover_tls_ca", NULL };
    int kname = conf_key_find(CONF_SECTION_POOL, "discover_name");
    int kport = conf_key_find(CONF_SECTION_POOL, "discover_port");
    int kdiscover = conf_key_find(CONF_SECTION_POOL, "discover");
    int line = l->key[kdiscover] ? l->key[kdiscover] : pool->line;
    bool is_etcd = pool->discover == CONF_DISCOVER_ETCD;

    /* a key of the other kind of discovery (or of none) is a mistake */
    for (const char *const *k = is_etcd ? dns_keys : etcd_keys; *k != NULL; k++) {
        int key = conf_key_find(CONF_SECTION_POOL, *k);

        if (l->key[key] && !l->bad[key])
            conf_error(p, l->key[key], "%s is for discover = %s", *k,
                       is_etcd ? "dns-srv or dns-a" : "etcd");
    }
    if (is_etcd) {
        conf_check_etcd(p, pool, l, line);
        return;
    }
    if (pool->discover == CONF_DISCOVER_NONE || l->bad[kname] || l->bad[kport])
        return;
    if (pool->discover_name[0] == '\0')
        conf_error(p, line, "pool %s: discover = %s needs discover_name", pool->name,
                   pool->discover == CONF_DISCOVER_DNS_SRV ? "dns-srv" : "dns-a");
    else if (!conf_dns_name_is_valid(pool->discover_name))
        conf_error(p, l->key[kname], "discover_name: \"%s\" is not a DNS name (labels of 1 to "
                   "63 of A-Z a-z 0-9 - _, at most 253 characters)", pool->discover_name);
    if (pool->discover == CONF_DISCOVER_DNS_A && pool->discover_port == 0)
        conf_error(p, l->key[kport] ? l->key[kport] : line,
                   "pool %s: discover = dns-a needs discover_port (1..65535)", pool->name);
}

/* The protocol checks' own keys: each is refused where its check would
 * ignore it, so that a typo of the check's kind shows. */
static void
conf_check_protocol(struct conf_parse *p, const struct conf_pool *pool,
                    const struct conf_lines *l)
{
    int kuser = conf_key_find(CONF_SECTION_POOL, "check_user");
    int kdb = conf_key_find(CONF_SECTION_POOL, "check_database");
    int krole = conf_key_find(CONF_SECTION_POOL, "check_role");
    int kservice = conf_key_find(CONF_SECTION_POOL, "check_grpc_service");
    int ktls = conf_key_find(CONF_SECTION_POOL, "check_tls");
    bool has_login = pool->check == CONF_CHECK_MYSQL || pool->check == CONF_CHECK_PGSQL;

    if (pool->check_user[0] != '\0' && !has_login)
        conf_error(p, l->key[kuser], "check_user needs check = mysql or pgsql");
    else if (strlen(pool->check_user) > CONF_CHECK_NAME_MAX)
        conf_error(p, l->key[kuser], "check_user is longer than %d bytes", CONF_CHECK_NAME_MAX);
    if (pool->check_database[0] != '\0' && pool->check != CONF_CHECK_PGSQL)
        conf_error(p, l->key[kdb], "check_database needs check = pgsql");
    else if (pool->check_database[0] != '\0' && pool->check_user[0] == '\0')
        conf_error(p, l->key[kdb], "check_database needs check_user (the login names both)");
    else if (strlen(pool->check_database) > CONF_CHECK_NAME_MAX)
        conf_error(p, l->key[kdb], "check_database is longer than %d bytes",
                   CONF_CHECK_NAME_MAX);
    if (pool->check_grpc_service[0] != '\0' && pool->check != CONF_CHECK_GRPC)
        conf_error(p, l->key[kservice], "check_grpc_service needs check = grpc");
    else if (strlen(pool->check_grpc_service) > CONF_CHECK_NAME_MAX)
        conf_error(p, l->key[kservice], "check_grpc_service is longer than %d bytes",
                   CONF_CHECK_NAME_MAX);
    /* https is TLS already; tcp and the databases have no TLS of ours */
    if (pool->check_tls && pool->check != CONF_CHECK_GRPC)
        conf_error(p, l->key[ktls], "check_tls = on needs check = grpc (for HTTP over TLS, "
                   "check = https)");
    if (pool->check_role == CONF_ROLE_ANY || l->bad[krole])
        return;
    if (pool->check != CONF_CHECK_MYSQL && pool->check != CONF_CHECK_REDIS)
        conf_error(p, l->key[krole], "check_role = %s needs check = mysql or redis",
                   conf_role_name(pool->check_role));
    else if (pool->check == CONF_CHECK_MYSQL && pool->check_user[0] == '\0')
        conf_error(p, l->key[krole], "check_role = %s needs check_user: MySQL answers "
                   "the read_only query only after a login", conf_role_name(pool->check_role));
}

/* Warning, heartbeats, slow start (balancer/rotation.c). */
static void
conf_check_health_inputs(struct conf_parse *p, const struct conf_pool *pool,
                         const struct conf_lines *l)
{
    int kwarn = conf_key_find(CONF_SECTION_POOL, "check_warn");
    int kweight = conf_key_find(CONF_SECTION_POOL, "warn_weight");
    int kttl = conf_key_find(CONF_SECTION_POOL, "heartbeat_ttl");
    int kdelete = conf_key_find(CONF_SECTION_POOL, "ephemeral_delete_after");

    if (pool->check_warn.nranges > 0 && pool->check != CONF_CHECK_HTTP &&
        pool->check != CONF_CHECK_HTTPS)
        conf_error(p, l->key[kwarn], "check_warn needs check = http or https");
    if (!l->bad[kweight] && (!pool->warn_weight.is_percent || pool->warn_weight.value == 0))
        conf_error(p, l->key[kweight], "warn_weight: use a share of the server's weight, "
                   "1%% to 100%% (e.g. 25%%)");
    /* Expiry is looked at every 100 ms (lb_beat_tick). */
    if (!l->bad[kttl] && pool->heartbeat_ttl_ms > 0 && pool->heartbeat_ttl_ms < 100)
        conf_error(p, l->key[kttl], "heartbeat_ttl: 0 (off) or at least 100ms");
    /* an ephemeral server is out at heartbeat_ttl, gone at this */
    if (l->key[kdelete] && !l->bad[kdelete] && !l->bad[kttl] &&
        pool->ephemeral_delete_after_ms < pool->heartbeat_ttl_ms)
        conf_error(p, l->key[kdelete], "ephemeral_delete_after: at least heartbeat_ttl (%llu ms)",
                   (unsigned long long)pool->heartbeat_ttl_ms);
}

static void
conf_check_pools(struct conf_parse *p)
{
    struct conf *c = p->c;
    int kserver = conf_key_find(CONF_SECTION_POOL, "server");
    int ktimeout = conf_key_find(CONF_SECTION_POOL, "check_timeout");
    int kinterval = conf_key_find(CONF_SECTION_POOL, "check_interval");
    int kreuse = conf_key_find(CONF_SECTION_POOL, "check_reuse");
    int kdiscover = conf_key_find(CONF_SECTION_POOL, "discover");
    int kagent_timeout = conf_key_find(CONF_SECTION_POOL, "agent_timeout");
    int kagent_interval = conf_key_find(CONF_SECTION_POOL, "agent_interval");
    size_t i;

    conf_check_names(p, CONF_NAMED(struct conf_pool, c->pools, c->npools), "pool", "", "");
    for (i = 0; i < c->npools; i++) {
        const struct conf_pool *pool = &c->pools[i];
        const struct conf_lines *l = &p->pool_lines[i];

        conf_check_required(p, CONF_SECTION_POOL, pool->name, l);
        /* A rejected server line already explains an empty pool; one that
         * discovers its servers may start without any, and so may one whose
         * servers register themselves (ephemeral, with heartbeat_ttl). */
        if (pool->nservers == 0 && !l->bad[kserver] && pool->discover == CONF_DISCOVER_NONE &&
            !l->bad[kdiscover] && pool->heartbeat_ttl_ms == 0)
            conf_error(p, pool->line, "pool %s has no servers", pool->name);
        conf_check_names(p, CONF_NAMED(struct conf_server, pool->servers, pool->nservers),
                         "server", " in pool ", pool->name);
        conf_check_discover(p, pool, l);

        /* A probe that may outlast its interval would overlap the next.
         * Only a check_timeout of the file can: unset, it follows a shorter
         * interval (conf_merge_pool). */
        if (!l->bad[ktimeout] && !l->bad[kinterval] &&
            pool->check_timeout_ms > pool->check_interval_ms) {
            char t[32], iv[32];
            conf_format_duration(pool->check_timeout_ms, t, sizeof(t));
            conf_format_duration(pool->check_interval_ms, iv, sizeof(iv));
            conf_error(p, l->key[ktimeout], "pool %s: check_timeout %s is longer than "
                       "check_interval %s", pool->name, t, iv);
        }
        if (!l->bad[kagent_timeout] && !l->bad[kagent_interval] &&
            pool->agent_timeout_ms > pool->agent_interval_ms) {
            char t[32], iv[32];
            conf_format_duration(pool->agent_timeout_ms, t, sizeof(t));
            conf_format_duration(pool->agent_interval_ms, iv, sizeof(iv));
            conf_error(p, l->key[kagent_timeout], "pool %s: agent_timeout %s is longer than "
                       "agent_interval %s", pool->name, t, iv);
        }
        /* Only an HTTP exchange has an end after which the connection can
         * carry the next probe; a tcp check is the connect itself. */
        if (pool->check_reuse && pool->check != CONF_CHECK_HTTP &&
            pool->check != CONF_CHECK_HTTPS)
            conf_error(p, l->key[kreuse], "check_reuse = on needs check = http or https");
        conf_check_protocol(p, pool, l);
        conf_check_dgram(p, pool, l);
        conf_check_health_inputs(p, pool, l);
        conf_check_outlier(p, pool, l);
    }
}
