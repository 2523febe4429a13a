/*
 * dsc_dns.h - the DNS sources of discovery (discover.h): SRV records (the
 * interface of Consul, Kubernetes headless services and CoreDNS), or the
 * A/AAAA records of one name and a fixed port.
 *
 * Each asks its DNS server (spec.endpoint) every interval with its own
 * non-blocking client: UDP with EDNS0, and TCP for an answer that does not
 * fit (libevent 2.1's evdns asks neither SRV nor over TCP).
 *
 * The spec, for both: name is the DNS name asked (any case, a final dot
 * or not: dsc_spec_of shows it lower case, without the dot); endpoint the
 * DNS server (dsc_resolver_from_file reads the system's); interval_ms the
 * time between rounds, each of which gives up after min(interval, 5 s).
 *
 * dsc_dns_srv: only the records of the lowest priority present are used;
 * each target's addresses come from the answer's additional section, or
 * from A and AAAA queries of their own. A target with several addresses
 * gives one server per address. Servers are named "target:port"
 * ("target:port@address" when the target has several addresses), their
 * weight is the SRV weight (0 read as 1); port is not used.
 *
 * dsc_dns_a: the A and AAAA records of name, each an "address:port"
 * server of weight 1 on spec.port.
 *
 * Either names a server by its address when its name would not fit
 * DSC_SERVER_NAME_MAX.
 */
#ifndef DSC_DNS_H
#define DSC_DNS_H

#include "discover.h"

#define DSC_UDP_MAX 4096                /* the EDNS0 payload asked for */

extern const struct dsc_source dsc_dns_srv;
extern const struct dsc_source dsc_dns_a;

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

#endif /* DSC_DNS_H */
