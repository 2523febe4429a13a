/*
 * conf_keys.c - the key tables and the typed setters they point to.
 */
#include "conf_keys.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "conf_value.h"
#include "lb_enum.h"

typedef int (*conf_set_pt)(const struct conf_key *k, void *field,
                           const char *value, int line, char *err,
                           size_t errlen);

struct conf_section_table {
    const char *name;
    const struct conf_key *keys;
    size_t nkeys;
};

static int conf_set_count(const struct conf_key *k, void *field,
                          const char *value, int line, char *err,
                          size_t errlen);
static int conf_set_duration(const struct conf_key *k, void *field,
                             const char *value, int line, char *err,
                             size_t errlen);
static int conf_set_enum(const struct conf_key *k, void *field,
                         const char *value, int line, char *err,
                         size_t errlen);
static int conf_set_string(const struct conf_key *k, void *field,
                           const char *value, int line, char *err,
                           size_t errlen);
static int conf_set_listen(const struct conf_key *k, void *field,
                           const char *value, int line, char *err,
                           size_t errlen);
static int conf_set_bool(const struct conf_key *k, void *field,
                         const char *value, int line, char *err,
                         size_t errlen);
static int conf_set_count_or_percent(const struct conf_key *k, void *field,
                                     const char *value, int line, char *err,
                                     size_t errlen);
static int conf_set_expect(const struct conf_key *k, void *field,
                           const char *value, int line, char *err,
                           size_t errlen);
static int conf_set_server(const struct conf_key *k, void *field,
                           const char *value, int line, char *err,
                           size_t errlen);
static int conf_set_hosts(const struct conf_key *k, void *field,
                          const char *value, int line, char *err,
                          size_t errlen);
static int conf_set_addr(const struct conf_key *k, void *field,
                         const char *value, int line, char *err,
                         size_t errlen);
static int conf_set_cidrs(const struct conf_key *k, void *field,
                          const char *value, int line, char *err,
                          size_t errlen);
static int conf_set_route(const struct conf_key *k, void *field,
                          const char *value, int line, char *err,
                          size_t errlen);
static int conf_set_rate(const struct conf_key *k, void *field,
                         const char *value, int line, char *err,
                         size_t errlen);
static int conf_set_dgram(const struct conf_key *k, void *field,
                          const char *value, int line, char *err,
                          size_t errlen);
static int conf_set_outlier(const struct conf_key *k, void *field,
                            const char *value, int line, char *err,
                            size_t errlen);

/* Enum fields are written through an int: the compiler may pick any
 * integer type for an enum, so make sure it picked int's size. */
_Static_assert(sizeof(enum conf_balance) == sizeof(int), "enum size");
_Static_assert(sizeof(enum conf_log_level) == sizeof(int), "enum size");
_Static_assert(sizeof(enum conf_check) == sizeof(int), "enum size");
_Static_assert(sizeof(enum conf_log_target) == sizeof(int), "enum size");
_Static_assert(sizeof(enum conf_splice) == sizeof(int), "enum size");
_Static_assert(sizeof(enum conf_discover) == sizeof(int), "enum size");
_Static_assert(sizeof(enum conf_role) == sizeof(int), "enum size");
_Static_assert(sizeof(enum conf_proxy) == sizeof(int), "enum size");

/* Indexed by the enums of conf.h, so their order is the enums' order. */
static const char *const conf_balance_names[] = {
    "roundrobin", "leastconn", "source", "random", NULL
};
static const char *const conf_log_level_names[] = {
    "debug", "info", "warn", "error", NULL
};
static const char *const conf_log_target_names[] = {
    "stderr", "syslog", NULL
};
static const char *const conf_check_names[] = {
    "none", "tcp", "http", "https", "mysql", "pgsql", "redis", "dns", "udp", "grpc", NULL
};
static const char *const conf_role_names[] = {
    "any", "primary", "replica", NULL
};
static const char *const conf_discover_names[] = {
    "none", "dns-srv", "dns-a", "etcd", NULL,
};
static const char *const conf_splice_names[] = {
    "off", "auto", "on", NULL
};
/* accept_proxy takes every enum conf_proxy; send_proxy all but "any" (a
 * server is sent one version; the server option has the same words,
 * conf_value.c). */
static const char *const conf_accept_proxy_names[] = {
    "off", "v1", "v2", "any", NULL
};
static const char *const conf_route_unknown_names[] = {
    [CONF_ROUTE_UNKNOWN_DEFAULT] = "default", [CONF_ROUTE_UNKNOWN_CLOSE] = "close", NULL
};
static const char *const conf_protocol_names[] = {
    [CONF_PROTOCOL_TCP] = "tcp", [CONF_PROTOCOL_UDP] = "udp", NULL
};
static const char *const conf_send_proxy_names[] = {
    "off", "v1", "v2", NULL
};
/* Not a key's values: names only (/stats "source"). */
static const char *const conf_source_names[] = {
    [CONF_SOURCE_CONFIG] = "config", [CONF_SOURCE_DNS] = "dns", [CONF_SOURCE_API] = "api",
    [CONF_SOURCE_ETCD] = "etcd",
};

/* One setter per type; the table rows only name the type. */
static const conf_set_pt conf_setters[CONF_TYPES] = {
    [CONF_TYPE_COUNT] = conf_set_count,
    [CONF_TYPE_DURATION] = conf_set_duration,
    [CONF_TYPE_ENUM] = conf_set_enum,
    [CONF_TYPE_STRING] = conf_set_string,
    [CONF_TYPE_WORD] = conf_set_string,
    [CONF_TYPE_PATH] = conf_set_string,
    [CONF_TYPE_NAME] = conf_set_string,
    [CONF_TYPE_LISTEN] = conf_set_listen,
    [CONF_TYPE_BOOL] = conf_set_bool,
    [CONF_TYPE_COUNT_OR_PERCENT] = conf_set_count_or_percent,
    [CONF_TYPE_EXPECT] = conf_set_expect,
    [CONF_TYPE_SERVER] = conf_set_server,
    [CONF_TYPE_HOSTS] = conf_set_hosts,
    [CONF_TYPE_ADDR] = conf_set_addr,
    [CONF_TYPE_CIDRS] = conf_set_cidrs,
    [CONF_TYPE_RATE] = conf_set_rate,
    [CONF_TYPE_ROUTE] = conf_set_route,
    [CONF_TYPE_DNS_TYPE] = conf_set_dgram,
    [CONF_TYPE_DNS_RCODES] = conf_set_dgram,
    [CONF_TYPE_BYTES] = conf_set_dgram,
    [CONF_TYPE_OUTLIER] = conf_set_outlier,
};

/* Duration bounds in milliseconds. */
#define CONF_MSEC(n) ((uint64_t)(n))
#define CONF_HOURS(n) ((uint64_t)(n) * 3600 * 1000)

#define CONF_COUNT(s, f, def, lo, hi) \
    { #f, CONF_TYPE_COUNT, offsetof(s, f), def, lo, hi, NULL, 0 }
#define CONF_DURATION(s, key, f, def, lo, hi) \
    { key, CONF_TYPE_DURATION, offsetof(s, f), def, lo, hi, NULL, 0 }
#define CONF_ENUM(s, f, def, names) \
    { #f, CONF_TYPE_ENUM, offsetof(s, f), def, 0, 0, names, 0 }
#define CONF_TYPED(s, key, f, type, def, flags) \
    { key, type, offsetof(s, f), def, 0, 0, NULL, flags }
#define CONF_CIDRS(s, f) \
    { #f, CONF_TYPE_CIDRS, offsetof(s, f), "", 0, 0, NULL, CONF_KEY_MAY_BE_EMPTY }

static const struct conf_key conf_global_keys[] = {
    CONF_COUNT(struct conf_global, workers, "0", 0, 256),
    CONF_COUNT(struct conf_global, max_connections, "10000", 1, 1000000),
    CONF_ENUM(struct conf_global, log_level, "info", conf_log_level_names),
    CONF_ENUM(struct conf_global, log_target, "stderr", conf_log_target_names),
    CONF_TYPED(struct conf_global, "syslog_socket", syslog_socket, CONF_TYPE_PATH, "/dev/log", 0),
    CONF_DURATION(struct conf_global, "shutdown_timeout", shutdown_timeout_ms,
                  "30s", 0, CONF_HOURS(1)),
    CONF_DURATION(struct conf_global, "withdraw_delay", withdraw_delay_ms, "0", 0,
                  CONF_HOURS(1)),
    CONF_TYPED(struct conf_global, "state_file", state_file, CONF_TYPE_STRING, "", 0),
    CONF_TYPED(struct conf_global, "control_socket", control_socket, CONF_TYPE_STRING, "", 0),
    CONF_TYPED(struct conf_global, "user", user, CONF_TYPE_WORD, "", 0),
    CONF_TYPED(struct conf_global, "group", group, CONF_TYPE_WORD, "", 0),
};

static const struct conf_key conf_health_keys[] = {
    CONF_COUNT(struct conf_health, threads, "2", 1, 64),
};

static const struct conf_key conf_admin_keys[] = {
    CONF_TYPED(struct conf_admin, "listen", listen, CONF_TYPE_LISTEN,
               "127.0.0.1:9900", 0),
    CONF_TYPED(struct conf_admin, "token", token, CONF_TYPE_STRING, "", 0),
    CONF_TYPED(struct conf_admin, "heartbeat_token", heartbeat_token, CONF_TYPE_STRING, "", 0),
    CONF_TYPED(struct conf_admin, "allowed_hosts", allowed_hosts,
               CONF_TYPE_HOSTS, "", 0),
};

static const struct conf_key conf_frontend_keys[] = {
    CONF_TYPED(struct conf_frontend, "listen", listen, CONF_TYPE_LISTEN, NULL,
               CONF_KEY_REQUIRED),
    /* pool, or route lines (conf_check_frontends wants one of the two) */
    CONF_TYPED(struct conf_frontend, "pool", pool_name, CONF_TYPE_NAME, NULL, 0),
    CONF_TYPED(struct conf_frontend, "route", routes, CONF_TYPE_ROUTE, NULL,
               CONF_KEY_REPEATABLE),
    CONF_TYPED(struct conf_frontend, "default_pool", default_pool, CONF_TYPE_NAME, NULL, 0),
    CONF_ENUM(struct conf_frontend, route_unknown, "default", conf_route_unknown_names),
    /* A ClientHello is a few hundred bytes, up to some 2 KiB with
     * post-quantum key shares; 64 KiB is the relay buffer it is read into. */
    CONF_COUNT(struct conf_frontend, sni_max_bytes, "16384", 256, 65536),
    CONF_DURATION(struct conf_frontend, "sni_timeout", sni_timeout_ms, "5s", CONF_MSEC(1),
                  CONF_HOURS(1)),
    /* A PROXY header from the balancer in front; accept_proxy_from is
     * required unless accept_proxy is off (conf_check_frontends). */
    CONF_ENUM(struct conf_frontend, accept_proxy, "off", conf_accept_proxy_names),
    CONF_CIDRS(struct conf_frontend, accept_proxy_from),
    CONF_DURATION(struct conf_frontend, "accept_proxy_timeout", accept_proxy_timeout_ms,
                  "3s", CONF_MSEC(1), CONF_HOURS(1)),
    /* Who may connect, and how much. Empty lists: anyone not denied. */
    CONF_CIDRS(struct conf_frontend, allow),
    CONF_CIDRS(struct conf_frontend, deny),
    CONF_COUNT(struct conf_frontend, max_connections_per_source, "0", 0, 1000000),
    { "rate_per_source", CONF_TYPE_RATE, offsetof(struct conf_frontend, rate_per_source),
      "0/s", 0, 1000000, NULL, 0 },
    CONF_COUNT(struct conf_frontend, source_table_size, "65536", 1, 16777216),
    CONF_COUNT(struct conf_frontend, source_ipv6_prefix, "64", 1, 128),
    /* UDP flows (conf_check_frontends: only with protocol = udp) */
    CONF_ENUM(struct conf_frontend, protocol, "tcp", conf_protocol_names),
    CONF_DURATION(struct conf_frontend, "udp_idle_timeout", udp_idle_timeout_ms, "30s",
                  CONF_MSEC(10), CONF_HOURS(1)),
    CONF_COUNT(struct conf_frontend, udp_responses, "0", 0, 1000000),
    CONF_COUNT(struct conf_frontend, udp_max_flows, "65536", 1, 1048576),
    CONF_TYPED(struct conf_frontend, "log_flows", log_flows, CONF_TYPE_BOOL, "off", 0),
};

static const struct conf_key conf_pool_keys[] = {
    CONF_ENUM(struct conf_pool, balance, "roundrobin", conf_balance_names),
    CONF_TYPED(struct conf_pool, "server", servers, CONF_TYPE_SERVER, NULL,
               CONF_KEY_REPEATABLE),
    CONF_DURATION(struct conf_pool, "connect_timeout", connect_timeout_ms,
                  "1s", CONF_MSEC(1), CONF_HOURS(1)),
    CONF_DURATION(struct conf_pool, "idle_timeout", idle_timeout_ms, "5m",
                  CONF_MSEC(1), CONF_HOURS(24)),
    CONF_COUNT(struct conf_pool, retries, "2", 0, 32),
    CONF_COUNT(struct conf_pool, queue_max, "0", 0, 1000000),
    CONF_DURATION(struct conf_pool, "queue_timeout", queue_timeout_ms, "5s",
                  CONF_MSEC(1), CONF_HOURS(1)),
    CONF_ENUM(struct conf_pool, splice, "auto", conf_splice_names),
    /* The servers' default; a server line's send_proxy= overrides it
     * (conf_merge_pool resolves the ones without). */
    CONF_ENUM(struct conf_pool, send_proxy, "off", conf_send_proxy_names),
    CONF_ENUM(struct conf_pool, discover, "none", conf_discover_names),
    CONF_TYPED(struct conf_pool, "discover_name", discover_name, CONF_TYPE_WORD, "", 0),
    CONF_COUNT(struct conf_pool, discover_port, "0", 0, 65535),
    CONF_TYPED(struct conf_pool, "discover_resolver", discover_resolver, CONF_TYPE_ADDR, "", 0),
    CONF_DURATION(struct conf_pool, "discover_interval", discover_interval_ms, "5s",
                  CONF_MSEC(100), CONF_HOURS(24)),
    CONF_TYPED(struct conf_pool, "discover_endpoints", discover_endpoints, CONF_TYPE_STRING,
               "http://127.0.0.1:2379", 0),
    CONF_TYPED(struct conf_pool, "discover_prefix", discover_prefix, CONF_TYPE_STRING, "", 0),
    CONF_TYPED(struct conf_pool, "discover_user", discover_user, CONF_TYPE_WORD, "", 0),
    CONF_TYPED(struct conf_pool, "discover_password", discover_password, CONF_TYPE_STRING, "",
               0),
    CONF_TYPED(struct conf_pool, "discover_tls_ca", discover_tls_ca, CONF_TYPE_STRING, "", 0),
    CONF_DURATION(struct conf_pool, "ephemeral_delete_after", ephemeral_delete_after_ms, "30s",
                  CONF_MSEC(100), CONF_HOURS(24)),
    CONF_ENUM(struct conf_pool, check, "tcp", conf_check_names),
    CONF_TYPED(struct conf_pool, "check_path", check_path, CONF_TYPE_PATH,
               "/", 0),
    CONF_TYPED(struct conf_pool, "check_host", check_host, CONF_TYPE_WORD, "",
               0),
    CONF_TYPED(struct conf_pool, "check_expect", check_expect,
               CONF_TYPE_EXPECT, "200-399", 0),
    CONF_TYPED(struct conf_pool, "check_warn", check_warn, CONF_TYPE_EXPECT, "",
               CONF_KEY_MAY_BE_EMPTY),
    { "warn_weight", CONF_TYPE_COUNT_OR_PERCENT, offsetof(struct conf_pool, warn_weight),
      "25%", 0, 100, NULL, 0 },
    CONF_DURATION(struct conf_pool, "heartbeat_ttl", heartbeat_ttl_ms, "0", 0, CONF_HOURS(24)),
    CONF_DURATION(struct conf_pool, "slow_start", slow_start_ms, "0", 0, CONF_HOURS(1)),
    CONF_COUNT(struct conf_pool, check_port, "0", 0, 65535),
    CONF_DURATION(struct conf_pool, "check_interval", check_interval_ms, "2s",
                  CONF_MSEC(1), CONF_HOURS(1)),
    CONF_DURATION(struct conf_pool, "check_timeout", check_timeout_ms, "1s",
                  CONF_MSEC(1), CONF_HOURS(1)),
    CONF_COUNT(struct conf_pool, rise, "2", 1, 100),
    CONF_COUNT(struct conf_pool, fall, "3", 1, 100),
    CONF_TYPED(struct conf_pool, "check_verify", check_verify, CONF_TYPE_BOOL,
               "off", 0),
    CONF_TYPED(struct conf_pool, "check_ca", check_ca, CONF_TYPE_STRING, "",
               0),
    CONF_TYPED(struct conf_pool, "check_reuse", check_reuse, CONF_TYPE_BOOL,
               "off", 0),
    CONF_TYPED(struct conf_pool, "check_user", check_user, CONF_TYPE_WORD, "", 0),
    CONF_TYPED(struct conf_pool, "check_database", check_database, CONF_TYPE_WORD, "", 0),
    CONF_ENUM(struct conf_pool, check_role, "any", conf_role_names),
    CONF_TYPED(struct conf_pool, "check_grpc_service", check_grpc_service, CONF_TYPE_WORD, "", 0),
    CONF_TYPED(struct conf_pool, "check_tls", check_tls, CONF_TYPE_BOOL, "off", 0),
    CONF_TYPED(struct conf_pool, "check_send_proxy", check_send_proxy, CONF_TYPE_BOOL,
               "off", 0),
    /* the datagram checks, dns and udp (conf_dgram.c) */
    CONF_TYPED(struct conf_pool, "check_dns_name", check_dns_name, CONF_TYPE_WORD, ".", 0),
    CONF_TYPED(struct conf_pool, "check_dns_type", check_dns_type, CONF_TYPE_DNS_TYPE, "SOA",
               0),
    CONF_TYPED(struct conf_pool, "check_dns_rcode", check_dns_rcodes, CONF_TYPE_DNS_RCODES,
               "NOERROR", 0),
    CONF_TYPED(struct conf_pool, "check_send", check_send, CONF_TYPE_BYTES, "", 0),
    CONF_TYPED(struct conf_pool, "check_expect_bytes", check_expect_bytes, CONF_TYPE_BYTES, "",
               0),
    /* the agent check (servers with agent_port=); 0: follow the check's
     * (conf_merge_pool) */
    CONF_DURATION(struct conf_pool, "agent_interval", agent_interval_ms, "0", 0, CONF_HOURS(1)),
    CONF_DURATION(struct conf_pool, "agent_timeout", agent_timeout_ms, "0", 0, CONF_HOURS(1)),
    CONF_TYPED(struct conf_pool, "agent_send", agent_send, CONF_TYPE_BYTES, "", 0),
    { "min_servers", CONF_TYPE_COUNT_OR_PERCENT,
      offsetof(struct conf_pool, min_servers), "1", 0, 10000, NULL, 0 },
    CONF_DURATION(struct conf_pool, "drain_timeout", drain_timeout_ms, "30s",
                  0, CONF_HOURS(24)),
    CONF_COUNT(struct conf_pool, observe_errors, "3", 0, 1000),
    /* outlier detection (conf_outlier.c): first_byte_timeout needs outlier */
    CONF_TYPED(struct conf_pool, "outlier", outlier, CONF_TYPE_OUTLIER, "", 0),
    CONF_DURATION(struct conf_pool, "first_byte_timeout", first_byte_timeout_ms, "0", 0,
                  CONF_HOURS(1)),
};

#define CONF_TABLE(name, keys) { name, keys, sizeof(keys) / sizeof(keys[0]) }

static const struct conf_section_table conf_sections[CONF_SECTION_KINDS] = {
    [CONF_SECTION_GLOBAL] = CONF_TABLE("global", conf_global_keys),
    [CONF_SECTION_HEALTH] = CONF_TABLE("health", conf_health_keys),
    [CONF_SECTION_ADMIN] = CONF_TABLE("admin", conf_admin_keys),
    [CONF_SECTION_FRONTEND] = CONF_TABLE("frontend", conf_frontend_keys),
    [CONF_SECTION_POOL] = CONF_TABLE("pool", conf_pool_keys),
};

_Static_assert(sizeof(conf_pool_keys) / sizeof(conf_pool_keys[0]) <=
               CONF_KEYS_MAX, "raise CONF_KEYS_MAX");
_Static_assert(sizeof(conf_frontend_keys) / sizeof(conf_frontend_keys[0]) <=
               CONF_KEYS_MAX, "raise CONF_KEYS_MAX");

const char *
conf_section_kind_name(enum conf_section_kind kind)
{
    return conf_sections[kind].name;
}

const struct conf_key *
conf_keys_of(enum conf_section_kind kind, size_t *n)
{
    *n = conf_sections[kind].nkeys;
    return conf_sections[kind].keys;
}

int
conf_key_find(enum conf_section_kind kind, const char *name)
{
    const struct conf_section_table *t = &conf_sections[kind];
    size_t i;

    for (i = 0; i < t->nkeys; i++)
        if (strcmp(t->keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

int
conf_key_set(const struct conf_key *k, void *obj, const char *value,
             int line, char *err, size_t errlen)
{
    char msg[384];

    /* The server setter needs the whole pool (array and count). */
    void *field = k->type == CONF_TYPE_SERVER ? obj : (char *)obj + k->offset;

    if (conf_setters[k->type](k, field, value, line, msg, sizeof(msg)) == 0)
        return 0;
    if (k->type == CONF_TYPE_SERVER)
        snprintf(err, errlen, "%s", msg);
    else
        snprintf(err, errlen, "%s: %s", k->name, msg);
    return -1;
}

int
conf_keys_merge(enum conf_section_kind kind, void *obj, const int *key_line,
                char *err, size_t errlen)
{
    const struct conf_section_table *t = &conf_sections[kind];
    size_t i;

    for (i = 0; i < t->nkeys; i++) {
        const struct conf_key *k = &t->keys[i];
        if (k->def == NULL || key_line[i] != 0)
            continue;
        if (conf_key_set(k, obj, k->def, 0, err, errlen) != 0)
            return -1;
    }
    return 0;
}

static int
conf_set_count(const struct conf_key *k, void *field, const char *value,
               int line, char *err, size_t errlen)
{
    uint64_t v;

    if (conf_parse_uint(value, &v, err, errlen) != 0)
        return -1;
    if (v < k->min || v > k->max) {
        snprintf(err, errlen, "%s is out of range (%llu..%llu)", value,
                 (unsigned long long)k->min, (unsigned long long)k->max);
        return -1;
    }
    *(uint32_t *)field = (uint32_t)v;
    return 0;
}

static int
conf_set_duration(const struct conf_key *k, void *field, const char *value,
                  int line, char *err, size_t errlen)
{
    uint64_t v;

    if (conf_parse_duration(value, &v, err, errlen) != 0)
        return -1;
    if (v < k->min || v > k->max) {
        char lo[32], hi[32];
        conf_format_duration(k->min, lo, sizeof(lo));
        conf_format_duration(k->max, hi, sizeof(hi));
        snprintf(err, errlen, "%s is out of range (%s..%s)", value, lo, hi);
        return -1;
    }
    *(uint64_t *)field = v;
    return 0;
}

static int
conf_set_enum(const struct conf_key *k, void *field, const char *value,
              int line, char *err, size_t errlen)
{
    int v;

    if (conf_parse_enum(value, k->names, &v, err, errlen) != 0)
        return -1;
    memcpy(field, &v, sizeof(v));
    return 0;
}

static int
conf_set_string(const struct conf_key *k, void *field, const char *value,
                int line, char *err, size_t errlen)
{
    char **dst = field;
    char *copy;

    switch (k->type) {
    case CONF_TYPE_WORD:
        if (strpbrk(value, " \t") != NULL) {
            snprintf(err, errlen, "\"%s\" must not contain spaces", value);
            return -1;
        }
        break;
    case CONF_TYPE_PATH:
        if (value[0] != '/' || strpbrk(value, " \t") != NULL) {
            snprintf(err, errlen, "\"%s\" is not a path (it starts with / "
                     "and has no spaces)", value);
            return -1;
        }
        break;
    case CONF_TYPE_NAME:
        if (!conf_name_is_valid(value)) {
            snprintf(err, errlen, "\"%s\" is not a valid name (use 1 to %d "
                     "of A-Z a-z 0-9 _ . -)", value, CONF_NAME_MAX);
            return -1;
        }
        break;
    default:
        break;
    }
    copy = strdup(value);
    if (copy == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(*dst);
    *dst = copy;
    return 0;
}

static int
conf_set_listen(const struct conf_key *k, void *field, const char *value,
                int line, char *err, size_t errlen)
{
    return conf_parse_addr(value, true, field, err, errlen) == CONF_ADDR_OK
               ? 0 : -1;
}

static int
conf_set_addr(const struct conf_key *k, void *field, const char *value,
              int line, char *err, size_t errlen)
{
    if (value[0] == '\0') {
        memset(field, 0, sizeof(struct conf_addr));
        return 0;
    }
    return conf_parse_addr(value, false, field, err, errlen) == CONF_ADDR_OK ? 0 : -1;
}

static int
conf_set_bool(const struct conf_key *k, void *field, const char *value,
              int line, char *err, size_t errlen)
{
    return conf_parse_bool(value, field, err, errlen);
}

static int
conf_set_count_or_percent(const struct conf_key *k, void *field,
                          const char *value, int line, char *err,
                          size_t errlen)
{
    struct conf_count_or_percent v;

    if (conf_parse_count_or_percent(value, &v, err, errlen) != 0)
        return -1;
    if (!v.is_percent && (v.value < k->min || v.value > k->max)) {
        snprintf(err, errlen, "%s is out of range (%llu..%llu or 0%%..100%%)",
                 value, (unsigned long long)k->min,
                 (unsigned long long)k->max);
        return -1;
    }
    *(struct conf_count_or_percent *)field = v;
    return 0;
}

static int
conf_set_expect(const struct conf_key *k, void *field, const char *value,
                int line, char *err, size_t errlen)
{
    if (value[0] == '\0' && (k->flags & CONF_KEY_MAY_BE_EMPTY)) {
        memset(field, 0, sizeof(struct conf_expect));   /* no code */
        return 0;
    }
    return conf_parse_expect(value, field, err, errlen);
}

static int
conf_set_server(const struct conf_key *k, void *field, const char *value,
                int line, char *err, size_t errlen)
{
    struct conf_pool *pool = field;
    struct conf_server srv, *grown;
    char name[CONF_NAME_MAX + 1];

    memset(&srv, 0, sizeof(srv));
    if (conf_parse_server(value, name, &srv, err, errlen) != 0)
        return -1;
    srv.name = strdup(name);
    grown = pool->servers;
    /* The capacity doubles whenever the count reaches a power of two, so
     * it needs no field: growing by one each time would copy a pool of
     * 10,000 servers 10,000 times. */
    if (srv.name != NULL && (pool->nservers & (pool->nservers - 1)) == 0)
        grown = realloc(pool->servers,
                        (pool->nservers ? pool->nservers * 2 : 1) * sizeof(*grown));
    if (srv.name == NULL || grown == NULL) {
        free(srv.name);
        free(srv.addr.text);
        snprintf(err, errlen, "server: out of memory");
        return -1;
    }
    srv.line = line;
    pool->servers = grown;
    pool->servers[pool->nservers++] = srv;
    return 0;
}

/* Empty only for a key that may be: allow, deny and accept_proxy_from
 * all may (unset, the same as empty); a list required by another key is
 * conf_check's to ask for. */
static int
conf_set_cidrs(const struct conf_key *k, void *field, const char *value,
               int line, char *err, size_t errlen)
{
    struct conf_cidrs *l = field;

    if (value[0] == '\0' && (k->flags & CONF_KEY_MAY_BE_EMPTY)) {
        memset(l, 0, sizeof(*l));
        return 0;
    }
    return conf_parse_cidrs(value, l, err, errlen);
}

static int
conf_set_rate(const struct conf_key *k, void *field, const char *value,
              int line, char *err, size_t errlen)
{
    uint64_t v;

    if (conf_parse_rate(value, &v, err, errlen) != 0)
        return -1;
    if (v < k->min || v > k->max) {
        snprintf(err, errlen, "%s is out of range (%llu/s..%llu/s)", value,
                 (unsigned long long)k->min, (unsigned long long)k->max);
        return -1;
    }
    *(uint32_t *)field = (uint32_t)v;
    return 0;
}

static int
conf_set_route(const struct conf_key *k, void *field, const char *value,
               int line, char *err, size_t errlen)
{
    struct conf_routes *r = field;
    struct conf_route route, *grown = r->v;

    if (conf_parse_route(value, &route, err, errlen) != 0)
        return -1;
    /* Doubling at powers of two, as conf_set_server. */
    if ((r->n & (r->n - 1)) == 0)
        grown = realloc(r->v, (r->n ? r->n * 2 : 1) * sizeof(*grown));
    if (grown == NULL) {
        free(route.pattern);
        free(route.pool_name);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    route.line = line;
    r->v = grown;
    r->v[r->n++] = route;
    return 0;
}

/* check_dns_type, check_dns_rcode, check_send, check_expect_bytes. */
static int
conf_set_dgram(const struct conf_key *k, void *field, const char *value,
               int line, char *err, size_t errlen)
{
    if (k->type == CONF_TYPE_DNS_TYPE)
        return conf_parse_dns_type(value, field, err, errlen);
    if (k->type == CONF_TYPE_DNS_RCODES)
        return conf_parse_dns_rcodes(value, field, err, errlen);
    return conf_parse_bytes(value, field, err, errlen);
}

static int
conf_set_outlier(const struct conf_key *k, void *field, const char *value,
                 int line, char *err, size_t errlen)
{
    return conf_parse_outlier(value, field, err, errlen);
}

static int
conf_set_hosts(const struct conf_key *k, void *field, const char *value,
               int line, char *err, size_t errlen)
{
    return conf_parse_hosts(value, field, err, errlen);
}

/* The names of conf.h, for logs and JSON. */
LB_ENUM_NAME(conf_balance_name, enum conf_balance, conf_balance_names, "unknown")
LB_ENUM_NAME(conf_log_level_name, enum conf_log_level, conf_log_level_names, "unknown")
LB_ENUM_NAME(conf_check_name, enum conf_check, conf_check_names, "unknown")
LB_ENUM_NAME(conf_role_name, enum conf_role, conf_role_names, "unknown")
LB_ENUM_NAME(conf_source_name, enum conf_source, conf_source_names, "unknown")
LB_ENUM_NAME(conf_proxy_name, enum conf_proxy, conf_accept_proxy_names, "unknown")
LB_ENUM_NAME(conf_protocol_name, enum conf_protocol, conf_protocol_names, "unknown")
LB_ENUM_NAME(conf_route_unknown_name, enum conf_route_unknown, conf_route_unknown_names,
             "unknown")
