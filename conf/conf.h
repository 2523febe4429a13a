/*
 * conf.h - the INI configuration, parsed and validated into plain structs.
 *
 * conf/ turns a file into a struct conf or a list of "FILE:LINE: message"
 * errors. It never exits, never logs and starts nothing: the caller decides
 * (lb -t prints, start-up exits, a reload keeps the old generation).
 * Only conf/ includes <ini.h>.
 *
 * Every object remembers the line it came from so that checks made after
 * parsing (unknown pool, duplicate names, pool without servers) still point
 * at the right line.
 */
#ifndef CONF_H
#define CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* splice(2) for the relay: never, for a direction once it moved a full
 * buffer in one read (bulk), or always. */
enum conf_splice {
    CONF_SPLICE_OFF = 0,
    CONF_SPLICE_AUTO,
    CONF_SPLICE_ON,
};

/* Where a pool's servers come from besides its server lines. */
enum conf_discover {
    CONF_DISCOVER_NONE = 0,
    CONF_DISCOVER_DNS_SRV,          /* SRV records of discover_name */
    CONF_DISCOVER_DNS_A,            /* A/AAAA of discover_name, discover_port */
    CONF_DISCOVER_ETCD,             /* the keys under discover_prefix */
};

/* The PROXY protocol (HAProxy's proxy-protocol.txt): which version a pool
 * sends its servers (off, v1, v2) and which a frontend accepts from the
 * balancer in front of it (any: either, told apart by the first bytes). */
enum conf_proxy {
    CONF_PROXY_OFF = 0,
    CONF_PROXY_V1,
    CONF_PROXY_V2,
    CONF_PROXY_ANY,                 /* accept_proxy only */
};

/* An address block of allow, deny or accept_proxy_from: "10.0.0.0/8",
 * "2001:db8::/32", or one address ("192.0.2.7" is /32, "::1" /128). Host
 * bits past the prefix are refused at parse time, so addr is the
 * network's first address. family is AF_INET or AF_INET6. */
struct conf_cidr {
    uint8_t family;
    uint8_t prefix;                 /* 0..32 or 0..128 */
    uint8_t addr[16];               /* network order; IPv4 in the first 4 */
};
/* A list of them, as written (comma-separated, one key per list). Longer
 * lists are a firewall's job (nftables sets): README, "Client addresses
 * and access control". */
#define CONF_CIDRS_MAX 64
struct conf_cidrs {
    size_t n;
    struct conf_cidr v[CONF_CIDRS_MAX];
};

/* Who put a server in its pool (shown in /stats as "source"). */
enum conf_source {
    CONF_SOURCE_CONFIG = 0,         /* a server line of the file */
    CONF_SOURCE_DNS,                /* discovery: dns-srv, dns-a */
    CONF_SOURCE_API,                /* POST /pools/{pool}/servers */
    CONF_SOURCE_ETCD,               /* discovery: etcd */
};

enum conf_balance {
    CONF_BALANCE_ROUNDROBIN = 0,
    CONF_BALANCE_LEASTCONN,
    CONF_BALANCE_SOURCE,
    CONF_BALANCE_RANDOM,
};

enum conf_log_level {
    CONF_LOG_DEBUG = 0,
    CONF_LOG_INFO,
    CONF_LOG_WARN,
    CONF_LOG_ERROR,
};

enum conf_log_target {
    CONF_LOG_TO_STDERR = 0,         /* with a <N> priority under journald */
    CONF_LOG_TO_SYSLOG,             /* RFC 5424 datagrams to syslog_socket */
};

enum conf_check {
    CONF_CHECK_NONE = 0,
    CONF_CHECK_TCP,
    CONF_CHECK_HTTP,
    CONF_CHECK_HTTPS,
    CONF_CHECK_MYSQL,               /* MySQL/MariaDB: greeting, login, role */
    CONF_CHECK_PGSQL,               /* PostgreSQL: SSLRequest or startup */
    CONF_CHECK_REDIS,               /* PING, ROLE */
    CONF_CHECK_DNS,                 /* a query over UDP, its rcode */
    CONF_CHECK_UDP,                 /* a datagram, a reply that starts so */
    CONF_CHECK_GRPC,                /* grpc.health.v1.Health/Check over h2 */
};

/* check_role: which server of a replicated set passes the check. */
enum conf_role {
    CONF_ROLE_ANY = 0,
    CONF_ROLE_PRIMARY,              /* writable: MySQL read_only off, Redis master */
    CONF_ROLE_REPLICA,
};

/* check_user and check_database: longer names exist in no server we speak
 * to (PostgreSQL's are at most 63 bytes, MariaDB's 128 characters). */
#define CONF_CHECK_NAME_MAX 128

#define CONF_NAME_MAX 63            /* frontend, pool and server names */

#define CONF_HOST_MAX 253           /* a DNS name's longest text form */

/* One URL of discover_endpoints: scheme://host[:port]. */
#define CONF_ENDPOINTS_MAX 8
struct conf_endpoint {
    bool is_tls;                    /* https */
    char host[CONF_HOST_MAX + 1];   /* a name or an address, without [] */
    uint16_t port;                  /* 2379 when the URL gives none */
};

/* A resolved socket address and the text it was written as. */
#define CONF_ADDR_TEXT_MAX 280      /* an address's text, '\0' included */

struct conf_addr {
    char text[CONF_ADDR_TEXT_MAX];  /* "host:port" or "[v6]:port", as written */
    struct sockaddr_storage ss;
    socklen_t len;
};

/* A server's address, stored at its size: 100,000 servers are kept twice
 * (the file's config and the generation's), and a struct conf_addr takes
 * 412 bytes where this takes 40 and its text. Always IPv4 or IPv6. */
union conf_sockaddr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

struct conf_server_addr {
    char *text;                     /* as in struct conf_addr; malloc'd, the
                                       config's (conf_free frees it) */
    union conf_sockaddr sa;
    socklen_t len;
};

/* "3" or "50%": min_servers. */
struct conf_count_or_percent {
    uint32_t value;
    bool is_percent;
};

/* check_expect: accepted HTTP status codes as inclusive ranges. Codes are
 * 100..599, the classes HTTP defines (RFC 9110, section 15); the checks'
 * status-line reader refuses any other code with the same bounds. */
#define CONF_STATUS_MIN 100
#define CONF_STATUS_MAX 599
#define CONF_EXPECT_MAX_RANGES 16
struct conf_expect {
    size_t nranges;
    struct { uint16_t lo, hi; } ranges[CONF_EXPECT_MAX_RANGES];
};

/* check_send, check_expect_bytes: bytes, written "0x" and hex digits or as
 * text with C escapes (conf_dgram.c). Any value that fits an INI line
 * (inih's 200 bytes) fits. */
#define CONF_BYTES_MAX 256
struct conf_bytes {
    size_t len;
    uint8_t v[CONF_BYTES_MAX];
};

/* outlier = errors:N, window:D, eject:D, max_eject:P%: live-traffic
 * errors that eject a server for a while (balancer/bal_outlier.h; parsed by
 * conf_outlier.c). errors 0 is off: the key empty or absent. */
struct conf_outlier {
    uint32_t errors;                /* 1..1000, 0 = off */
    uint64_t window_ms;             /* 100ms..1h, default 10s */
    uint64_t eject_ms;              /* 100ms..1h, default 30s: the first
                                       ejection; repeats double, to 10x */
    uint32_t max_eject_percent;     /* 0..100, default 50 */
};

struct conf_global {
    uint32_t workers;               /* 0 in the file = one per CPU; resolved
                                       to the affinity mask's count by
                                       conf_load */
    uint32_t max_connections;
    enum conf_log_level log_level;
    enum conf_log_target log_target;
    char *syslog_socket;            /* log_target = syslog: where */
    uint64_t shutdown_timeout_ms;
    uint64_t withdraw_delay_ms;     /* SIGTERM: not ready, still serving */
    char *state_file;               /* "" = off (lb/state/state.c) */
    char *control_socket;           /* "" = off: lb -x (lb/handover/) */
    char *user, *group;             /* "" = stay: the privileges after the binds */
};

struct conf_health {
    uint32_t threads;
};

/* [admin] allowed_hosts: the names the admin port answers to besides its
 * listen address and localhost (its Host check defeats DNS rebinding). */
#define CONF_HOSTS_MAX 16
struct conf_hosts {
    size_t n;
    char names[CONF_HOSTS_MAX][CONF_HOST_MAX + 1];  /* lower case */
};

struct conf_admin {
    struct conf_addr listen;
    char *token;                    /* "" when unset */
    char *heartbeat_token;          /* "" when unset: heartbeats only */
    struct conf_hosts allowed_hosts;
};

struct conf_server {
    char *name;
    struct conf_server_addr addr;
    uint32_t weight;
    uint32_t max_connections;       /* 0 = no cap */
    uint32_t agent_port;            /* its agent (agent_port=), 0 = none */
    enum conf_proxy send_proxy;     /* its send_proxy= option, else the
                                       pool's (resolved by the parser) */
    int line;                       /* 0 for a server not from the file */
    enum conf_source source;
    bool is_ephemeral;              /* API: registered itself, goes after
                                       ephemeral_delete_after silent */
};

struct conf_pool {
    char *name;
    int line;                       /* of the [pool NAME] header */
    enum conf_balance balance;
    struct conf_server *servers;
    size_t nservers;
    uint64_t connect_timeout_ms;
    uint64_t idle_timeout_ms;
    uint32_t retries;
    uint32_t queue_max;             /* 0 = bounded by max_connections only */
    uint64_t queue_timeout_ms;
    enum conf_splice splice;
    enum conf_proxy send_proxy;     /* off, v1, v2: the servers' default */

    /* discovery: more servers from DNS (see discover/discover.h) */
    enum conf_discover discover;
    char *discover_name;            /* "" when unset */
    uint32_t discover_port;         /* dns-a: the servers' port */
    struct conf_addr discover_resolver; /* len 0: the system's */
    uint64_t discover_interval_ms;
    char *discover_endpoints;       /* etcd: URLs (conf_endpoints_parse) */
    char *discover_prefix;          /* etcd: "" when unset */
    char *discover_user;            /* etcd: "" = no authentication */
    char *discover_password;
    char *discover_tls_ca;          /* etcd over https: "" = the system's */
    uint64_t ephemeral_delete_after_ms; /* an ephemeral server without a
                                           heartbeat for this long goes */

    /* health checks */
    enum conf_check check;
    char *check_path;
    char *check_host;               /* "" = the server's address */
    struct conf_expect check_expect;
    struct conf_expect check_warn;  /* http(s): alive but overloaded; none
                                       when nranges is 0 */
    struct conf_count_or_percent warn_weight;   /* a percent, 1..100 */
    uint64_t heartbeat_ttl_ms;      /* 0 = no heartbeats */
    uint64_t slow_start_ms;         /* 0 = none */
    uint32_t check_port;            /* 0 = the server's own port */
    uint64_t check_interval_ms;
    uint64_t check_timeout_ms;
    uint32_t rise;
    uint32_t fall;
    bool check_verify;
    char *check_ca;                 /* "" when unset */
    bool check_reuse;               /* http(s): keep the connection between
                                       probes */
    char *check_user;               /* mysql, pgsql: "" = no login step */
    char *check_database;           /* pgsql: "" = the user's name */
    enum conf_role check_role;      /* mysql, redis */
    char *check_grpc_service;       /* grpc: the service asked, "" = all */
    bool check_tls;                 /* grpc: over TLS, ALPN h2 */
    bool check_send_proxy;          /* a PROXY header (v1 UNKNOWN, v2
                                       LOCAL) opens every check connection,
                                       in the server's send_proxy version
                                       (v1 when that is off) */
    /* the datagram checks, dns and udp (conf_dgram.c) */
    char *check_dns_name;           /* dns: the name asked, "." the root */
    uint16_t check_dns_type;        /* dns: SOA, A, ... or TYPEnnn */
    uint16_t check_dns_rcodes;      /* dns: bit n set when RCODE n passes */
    struct conf_bytes check_send;   /* udp: the datagram sent */
    struct conf_bytes check_expect_bytes;   /* udp: how a reply starts;
                                               len 0: any reply passes */
    /* the agent check of servers with agent_port= (health/agent.h) */
    uint64_t agent_interval_ms;     /* the check_interval when unset */
    uint64_t agent_timeout_ms;      /* the check_timeout, at most the
                                       agent_interval, when unset */
    struct conf_bytes agent_send;   /* sent first; len 0: nothing */

    /* removal: draining, the guard, live-traffic detection */
    struct conf_count_or_percent min_servers;
    uint64_t drain_timeout_ms;
    uint32_t observe_errors;
    struct conf_outlier outlier;
    uint64_t first_byte_timeout_ms; /* the client sent data and the server
                                       nothing for this long: an outlier
                                       error (no_first_byte); 0 = off,
                                       needs outlier */
};

/* route = PATTERN POOL: TLS passthrough routed by the client's SNI.
 * PATTERN is kept lower case without a trailing dot: an exact name
 * "api.example.com", a wildcard of one label "*.example.com", or "*". */
struct conf_route {
    char *pattern;
    char *pool_name;
    size_t pool_index;              /* into conf.pools, resolved by conf_load */
    int line;
};
struct conf_routes {
    struct conf_route *v;           /* sorted by pattern by conf_load */
    size_t n;
};

/* route_unknown: what a first flight that is not a ClientHello gets. */
enum conf_route_unknown {
    CONF_ROUTE_UNKNOWN_DEFAULT = 0, /* default_pool (closed without one) */
    CONF_ROUTE_UNKNOWN_CLOSE,
};

/* protocol: what a frontend listens for. */
enum conf_protocol {
    CONF_PROTOCOL_TCP = 0,
    CONF_PROTOCOL_UDP,              /* datagram flows (README, "UDP") */
};

struct conf_frontend {
    char *name;
    int line;
    struct conf_addr listen;
    int listen_line;                /* of its listen key: where a bind
                                       error points */
    enum conf_protocol protocol;
    int protocol_line;              /* 0 when the key is absent */
    char *pool_name;                /* NULL when the frontend has routes */
    size_t pool_index;              /* into conf.pools, resolved by conf_load */

    /* routes instead of pool (README, "Routing TLS by name") */
    struct conf_routes routes;
    char *default_pool;             /* no SNI, or no route matched; NULL:
                                       such clients are closed */
    size_t default_pool_index;
    enum conf_route_unknown route_unknown;
    uint32_t sni_max_bytes;         /* what a ClientHello may take */
    uint64_t sni_timeout_ms;        /* ... and how long */

    /* a PROXY header from the balancer in front (accept_proxy_from only) */
    enum conf_proxy accept_proxy;
    struct conf_cidrs accept_proxy_from;    /* required unless accept_proxy
                                               is off */
    uint64_t accept_proxy_timeout_ms;

    /* who may connect: the client's address (the header's, after one) */
    struct conf_cidrs allow;        /* n 0: anyone not denied */
    struct conf_cidrs deny;         /* wins over allow */
    uint32_t max_connections_per_source;    /* 0 = no cap */
    uint32_t rate_per_source;       /* new connections per second, 0 = any */
    uint32_t source_table_size;     /* addresses the two limits track */
    uint32_t source_ipv6_prefix;    /* IPv6 sources are grouped by it */

    /* protocol = udp: a flow per client address and port */
    uint64_t udp_idle_timeout_ms;   /* a flow without traffic ends */
    uint32_t udp_responses;         /* ... or after this many replies; 0 =
                                       no count (nginx's proxy_responses) */
    uint32_t udp_max_flows;         /* open at once; the LRU one goes */
    bool log_flows;                 /* a flow_end event per flow */
};

struct conf {
    char *file;                     /* the path given to conf_load (the
                                       name given to conf_load_text) */
    struct conf_global global;
    struct conf_health health;
    struct conf_admin admin;
    struct conf_frontend *frontends;
    size_t nfrontends;
    struct conf_pool *pools;
    size_t npools;
};

/* Reads, parses and validates the file at path.
 * Success: returns 0 and *out, which the caller frees with conf_free.
 * Failure: returns -1 and *errors, a malloc'd string holding one
 * "FILE:LINE: message\n" per problem found (the caller frees it); *out is
 * left NULL. Any thread; no global state. */
int conf_load(const char *path, struct conf **out, char **errors);

/* The CPUs this process may run on (its affinity: taskset, a cpuset):
 * what workers = 0 resolves to. */
unsigned conf_cpu_count(void);

/* The same on len bytes of text in memory (any bytes, NULs included), as
 * if they were the content of a file called name: name prefixes the
 * messages and becomes c->file. conf_load reads the file and then runs
 * these same steps. Any thread; no global state. */
int conf_load_text(const char *name, const char *text, size_t len,
                   struct conf **out, char **errors);
/* conf_load for a reload, which may come while the file is being written
 * in place (an editor, a deploy tool, a watcher that signals at the first
 * write): loads the file only when it has not changed for quiet_ms and is
 * the same after the load (an mtime in the future counts as old). Returns
 * conf_load's 0 or -1, or 1 when the file is too fresh: *retry_ms says
 * when to try again, and *errors holds "FILE: the file is still being
 * written ..." for a caller that gives up (it frees it). Never sleeps.
 * Any thread. */
int conf_load_settled(const char *path, unsigned quiet_ms, struct conf **out, char **errors,
                      uint64_t *retry_ms);
void conf_free(struct conf *c);
/* A deep copy of c, or NULL when out of memory. */
struct conf *conf_dup(const struct conf *c);
/* Appends a server to pool pool_index of c, from the text a server line
 * would hold ("NAME ADDRESS [weight=N] ..."), validated as that line would
 * be: 0, or -1 with the line's message in err ("server: ..."). Duplicates
 * are the caller's to refuse. */
int conf_pool_add_server(struct conf *c, size_t pool_index, const char *text,
                         enum conf_source source, char *err, size_t errlen);

/* discover_endpoints' comma-separated URLs into out (at most max):
 * their number, or -1 with why in err (naming the URL). */
int conf_endpoints_parse(const char *text, struct conf_endpoint *out, size_t max, char *err,
                         size_t errlen);

/* The route of fe that a client asking for name takes (lower case,
 * without a trailing dot, as lb_hello_sni gives it; "" when it sent no
 * SNI): its index in fe->routes, the most specific match (exact, then
 * "*.", then "*"), or -1 when none does (default_pool). O(log routes). */
int conf_route_match(const struct conf_frontend *fe, const char *name);

/* Names for logs and JSON. */
const char *conf_balance_name(enum conf_balance b);
const char *conf_log_level_name(enum conf_log_level l);
const char *conf_check_name(enum conf_check c);
const char *conf_role_name(enum conf_role r);
const char *conf_source_name(enum conf_source s);
const char *conf_proxy_name(enum conf_proxy p);
const char *conf_route_unknown_name(enum conf_route_unknown u);
const char *conf_protocol_name(enum conf_protocol p);
/* len bytes as check_send would write them (text, with \\ \r \n \t \0
 * and \xHH escapes), into out (outlen bytes, NUL-ended), cut with "..."
 * where it does not fit: a udp check's reply in its detail. */
void conf_bytes_text(const uint8_t *b, size_t len, char *out, size_t outlen);

#endif /* CONF_H */
