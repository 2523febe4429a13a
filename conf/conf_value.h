/*
 * conf_value.h - parsers for one config value each (internal to conf/).
 *
 * Pure functions: no state, no I/O except the name lookup in conf_parse_addr.
 * Each returns 0 on success, or -1 and a message in err (errlen bytes,
 * always NUL-terminated) that quotes the input and says what was expected,
 * e.g. "10q" is not a duration (use ms, s, m or h). The caller adds the
 * FILE:LINE: and the key name. Bounds are the caller's business (the key
 * table holds them), except where the format itself fixes them (ports,
 * status codes, percentages, weights). Any thread.
 */
#ifndef CONF_VALUE_H
#define CONF_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"

#define CONF_WEIGHT_MIN 1
#define CONF_WEIGHT_MAX 256
#define CONF_SERVER_CONNS_MAX 1000000   /* a server's max_connections */

/* The send_proxy of a server line without the option: "the pool's".
 * conf_parse_server leaves it in conf_server.send_proxy; conf_load puts the
 * pool's value in its place once the whole pool is read (its send_proxy
 * line may come after its servers), conf_pool_add_server at once. A struct
 * conf handed out never holds it. Not one of enum conf_proxy's values, and
 * within int, the size of the enum. */
#define CONF_PROXY_POOL ((enum conf_proxy)0x7f)

/* [A-Za-z0-9_.-]{1,63}: names end up in logs, JSON and metric labels
 * unquoted, so nothing that needs escaping gets in. */
bool conf_name_is_valid(const char *s);
/* A server's name may also hold ':', '@', '[' and ']', so that a
 * discovered server is named after its target and port ("web1.example:8080",
 * "[2001:db8::1]:8080"). */
bool conf_server_name_is_valid(const char *s);

/* Skips blanks, returns the length of the token now at *p (0 at the end):
 * the words of a multi-word value (server, route). */
size_t conf_next_token(const char **p);

/* A DNS name of len bytes (route patterns, discover_name): labels of 1 to
 * 63 letters, digits, '-' and '_' (seen in real names, and SRV names start
 * with one), at most CONF_HOST_MAX bytes without an optional final dot.
 * Writes it lower case and without that dot into out (CONF_HOST_MAX + 1
 * bytes). conf_route.c. */
bool conf_host_normalise(const char *s, size_t len, char *out);

/* route = PATTERN POOL (conf_route.c): out->pattern and out->pool_name
 * malloc'd (the pattern lower case, without a trailing dot). */
int conf_parse_route(const char *s, struct conf_route *out, char *err, size_t errlen);
/* Sorts a frontend's routes by pattern (conf_route_match's order). */
void conf_routes_sort(struct conf_routes *r);

/* The next item of a comma-separated list at *p, without the blanks
 * around it: sets *item, returns its length (0: an empty item), moves *p
 * past the item's comma and tells in *more whether there was one. */
size_t conf_list_next(const char **p, const char **item, bool *more);

/* The datagram checks' values (conf_dgram.c). check_dns_type: a name of
 * include/lb_dns.h's types, any case, or TYPEnnn. check_dns_rcode: RCODE
 * names, any case, comma-separated (*out: bit n for RCODE n). check_send,
 * check_expect_bytes: "0x" and pairs of hex digits, or text in which \\,
 * \r, \n, \t, \0 and \xHH are escapes; "" is no byte. */
int conf_parse_dns_type(const char *s, uint16_t *out, char *err, size_t errlen);
int conf_parse_dns_rcodes(const char *s, uint16_t *out, char *err, size_t errlen);
int conf_parse_bytes(const char *s, struct conf_bytes *out, char *err, size_t errlen);

/* outlier (conf_outlier.c): "" is off (errors 0); else comma-separated
 * parts errors:N (required, 1..1000), window:D (100ms..1h, default 10s),
 * eject:D (100ms..1h, default 30s), max_eject:P% (0%..100%, default 50%),
 * in any order, each at most once. Each message names its part. */
int conf_parse_outlier(const char *s, struct conf_outlier *out, char *err, size_t errlen);

/* Unsigned decimal integer: digits only (no sign, space, or empty). */
int conf_parse_uint(const char *s, uint64_t *out, char *err, size_t errlen);

/* N followed by ms, s, m or h; a bare "0" is allowed, any other bare
 * number needs a unit. Stores milliseconds. */
int conf_parse_duration(const char *s, uint64_t *out_ms, char *err,
                        size_t errlen);

/* Writes ms in the largest unit that is exact ("0", "250ms", "30s", "1h"),
 * the way the file would say it, for range messages. */
void conf_format_duration(uint64_t ms, char *buf, size_t len);

/* on/off, yes/no, true/false, 1/0, any case. */
int conf_parse_bool(const char *s, bool *out, char *err, size_t errlen);

/* One of names[] (NULL-terminated), any case; *out is its index. */
int conf_parse_enum(const char *s, const char *const *names, int *out,
                    char *err, size_t errlen);

/* "3" or "50%". Percentages must be 0..100; counts are not bounded here. */
int conf_parse_count_or_percent(const char *s,
                                struct conf_count_or_percent *out,
                                char *err, size_t errlen);

/* Comma-separated status codes (100..599) and ranges LO-HI, LO <= HI, at
 * most CONF_EXPECT_MAX_RANGES items; spaces around items are allowed. */
int conf_parse_expect(const char *s, struct conf_expect *out, char *err,
                      size_t errlen);

/* Comma-separated host names (RFC 1123 labels) or IP addresses, IPv6 in
 * brackets as a Host header writes it ([::1]); no port, no wildcard; at
 * most CONF_HOSTS_MAX; spaces around items allowed; empty = none. Stored
 * in lower case. */
int conf_parse_hosts(const char *s, struct conf_hosts *out, char *err,
                     size_t errlen);

/* Comma-separated address blocks, ADDR/PREFIX or a bare ADDR (IPv4 /32,
 * IPv6 /128), spaces around items allowed, at most CONF_CIDRS_MAX. Only
 * literals (inet_pton), never names: a list checked on every accept must
 * not depend on DNS. Host bits past the prefix are refused, with the
 * network to write instead. An IPv4-mapped IPv6 block (::ffff:a.b.c.d/N,
 * N >= 96) is stored as the IPv4 block it maps (/N-96): the matcher takes a
 * mapped client for its IPv4 address, so the block as written would never
 * match. Empty is an error: the caller decides whether a key may be
 * empty. */
int conf_parse_cidrs(const char *s, struct conf_cidrs *out, char *err,
                     size_t errlen);

/* "N/s": new connections per second, N digits only. Bounds are the
 * caller's. */
int conf_parse_rate(const char *s, uint64_t *out, char *err, size_t errlen);

enum conf_addr_status {
    CONF_ADDR_OK = 0,
    CONF_ADDR_BAD,                  /* malformed: bad port, brackets, ... */
    CONF_ADDR_NO_PORT,              /* no ":PORT" at all */
    CONF_ADDR_UNRESOLVED,           /* well formed, getaddrinfo failed */
};

/* "host:port" or "[v6]:port", port 1..65535. The host may be a name: it is
 * resolved with getaddrinfo (AF_UNSPEC, SOCK_STREAM) and the first result
 * kept, so this may block on DNS. With is_listen, an empty host or "*"
 * means 0.0.0.0. Returns the status and, unless OK, a message in err. */
enum conf_addr_status conf_parse_addr(const char *s, bool is_listen,
                                      struct conf_addr *out, char *err,
                                      size_t errlen);

/* True when two listen addresses would take the same port: same family and
 * port, and the same address or one of them the wildcard. */
bool conf_addr_overlaps(const struct conf_addr *a, const struct conf_addr *b);

/* A pool's "server" value: NAME HOST:PORT [weight=N] [max_connections=N]
 * [send_proxy=off|v1|v2]. Fills out's addr, weight, max_connections and
 * send_proxy (CONF_PROXY_POOL without the option) and writes the name into
 * name (at least CONF_NAME_MAX + 1 bytes). out->addr.text is malloc'd: the
 * caller frees it, or gives it to a config, which does. Unlike the other
 * parsers, its message is complete after "FILE:LINE: " because it names
 * the server ("server web1: ...") once the name is known. */
int conf_parse_server(const char *s, char *name, struct conf_server *out,
                      char *err, size_t errlen);

/* Finds the first byte that makes buf (len bytes) not a text file: NUL,
 * other control characters than tab and line ends, DEL, or invalid UTF-8.
 * Returns false for text; else true with its 1-based line and column and
 * the byte itself. */
bool conf_find_binary(const char *buf, size_t len, int *line, size_t *col,
                      unsigned char *byte);

/* strerror into a caller buffer: strerror itself is not thread-safe and a
 * reload may run beside workers that format errors too. */
const char *conf_strerror(int errnum, char *buf, size_t len);

#endif /* CONF_VALUE_H */
