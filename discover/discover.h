/*
 * discover.h - a pool's servers from DNS (dsc: discovery): SRV records
 * (the interface of Consul, Kubernetes headless services and CoreDNS), or
 * the A/AAAA records of one name and a fixed port.
 *
 * A struct dsc asks its DNS server every interval, on the event base it is
 * given (main's: never a thread that relays or probes), with its own
 * non-blocking client: UDP with EDNS0, and TCP for an answer that does not
 * fit (libevent 2.1's evdns asks neither SRV nor over TCP). Each round ends
 * in one call of the callback: the whole set of servers, or an error. An
 * empty answer is an error too: the caller keeps its last set, so neither a
 * failed nor an empty answer ever empties a pool.
 *
 * SRV: only the records of the lowest priority present are used; each
 * target's addresses come from the answer's additional section, or from
 * A and AAAA queries of their own. A target with several addresses gives
 * one server per address.
 */
#ifndef DISCOVER_H
#define DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;

#define DSC_NAME_MAX 255                /* text form, with room for the NUL */
#define DSC_UDP_MAX 4096                /* the EDNS0 payload asked for */
#define DSC_SERVER_NAME_MAX 63          /* as a config server name */

enum dsc_kind {
    DSC_KIND_SRV = 0,
    DSC_KIND_A,                         /* A and AAAA of the name, with port */
};

struct dsc_spec {
    enum dsc_kind kind;
    char name[DSC_NAME_MAX + 1];
    uint16_t port;                      /* DSC_KIND_A */
    struct sockaddr_storage resolver;
    socklen_t resolver_len;
    uint64_t interval_ms;
};

/* One discovered server. name: "target:port" (SRV; "target:port@address"
 * when the target has several addresses) or "address:port" (A), or the
 * address form when the other does not fit DSC_SERVER_NAME_MAX. */
struct dsc_server {
    char name[DSC_SERVER_NAME_MAX + 1];
    char address[64];                   /* "10.0.0.9:8080", "[::1]:8080" */
    uint32_t weight;                    /* SRV weight, 0 read as 1 (the
                                           caller clamps it to its range) */
};

/* A round's end: n servers (n >= 1, sorted by name) and error NULL, or
 * n == 0 and error saying why ("SRV web.example: SERVFAIL", "SRV
 * web.example: no answer within 5000 ms", "empty answer", ...). Called on
 * the dsc's base; it must not dsc_free the dsc (defer that). */
typedef void (*dsc_result_pt)(void *arg, const struct dsc_server *servers, size_t n,
                              const char *error);

/* Starts the rounds: the first at once, then every interval. NULL when
 * out of memory or no socket. */
struct dsc *dsc_new(struct event_base *base, const struct dsc_spec *spec, dsc_result_pt fn,
                    void *arg);
void dsc_free(struct dsc *d);
/* The spec d runs (a reload keeps a dsc whose spec did not change). */
const struct dsc_spec *dsc_spec_of(const struct dsc *d);

/* The first "nameserver" of a resolv.conf-format file, port 53. -1 with
 * err set when there is none. */
int dsc_resolver_from_file(const char *path, struct sockaddr_storage *ss, socklen_t *len,
                           char *err, size_t errlen);

/* ---------------------------------------------- messages (dsc_msg.c, pure) */

#define DSC_TYPE_A 1
#define DSC_TYPE_AAAA 28
#define DSC_TYPE_SRV 33

struct dsc_rr {
    uint16_t type;                      /* A, AAAA or SRV: the others are
                                           skipped */
    uint8_t section;                    /* 1 answer, 2 authority, 3 additional */
    char owner[DSC_NAME_MAX + 1];       /* lower case, no final dot */
    uint16_t priority, weight, port;    /* SRV */
    char target[DSC_NAME_MAX + 1];      /* SRV */
    uint8_t addr[16];                   /* A: 4 bytes, AAAA: 16 */
};

struct dsc_msg {
    int rcode;
    bool is_truncated;                  /* TC: no records read, ask over TCP */
    struct dsc_rr *rrs;
    size_t nrrs, cap;
};

/* A query for name and type into buf, with an EDNS0 record. Its length,
 * or -1 when name is not a valid DNS name or buf is too small. */
int dsc_msg_query(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t type);
/* Parses an answer to the query (id, name, type). 0 and *out (freed with
 * dsc_msg_fini); 1 when msg is not an answer to that query (id, question);
 * -1 when it is but malformed. err says why, and nothing is to free. */
int dsc_msg_parse(const uint8_t *msg, size_t len, uint16_t id, const char *name, uint16_t type,
                  struct dsc_msg *out, char *err, size_t errlen);
void dsc_msg_fini(struct dsc_msg *m);
const char *dsc_rcode_name(int rcode);

#endif /* DISCOVER_H */
