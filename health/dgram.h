/*
 * dgram.h - the datagram checks (dns, udp) as pure exchanges: the datagram
 * a probe sends, and the verdict on each datagram that comes back.
 *
 * probe.c moves the datagrams over a connected UDP socket (a fresh one,
 * so a fresh source port, per probe) and keeps the time; nothing here
 * touches a socket or a clock, so every verdict is unit-tested and fuzzed
 * on its own (tests/fuzz/fuzz_dns_answer.c).
 *
 * dns: the query (RD set, as dig sends it: an authoritative server ignores
 * the bit, a recursor answers from its cache or asks; no EDNS0, since only
 * the header and the question are read and a truncated answer has both)
 * carries a random id. Only a datagram with that id, QR set and the same
 * question (RFC 5452, section 9.1) is the answer: anything else is
 * ignored, as a late answer to an earlier probe or a spoof, and counted
 * for the timeout's detail. The answer passes when its rcode is one of
 * check_dns_rcode.
 *
 * udp: the first datagram decides: it passes when it starts with
 * check_expect_bytes (any datagram when that is empty).
 */
#ifndef HC_DGRAM_H
#define HC_DGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "hc.h"
#include "lb_dns.h"

/* What a probe sends at most: a query, or check_send. */
#define HC_DGRAM_OUT_MAX (LB_DNS_QUERY_MAX > CONF_BYTES_MAX ? LB_DNS_QUERY_MAX : CONF_BYTES_MAX)
/* What a probe reads of a reply (the kernel drops the rest of a longer
 * one): a DNS header and the longest question, or the longest
 * check_expect_bytes, with room to spare. */
#define HC_DGRAM_IN_MAX 512

/* Whether a datagram is the answer to a query; why not. */
enum hc_dns_match {
    HC_DNS_ANSWER = 0,
    HC_DNS_SHORT,                   /* shorter than a header */
    HC_DNS_WRONG_ID,
    HC_DNS_NOT_RESPONSE,            /* QR clear: a query, not its answer */
    HC_DNS_QUESTION_MISMATCH,       /* not exactly our one question */
};

/* dns_msg.c: whether msg (len bytes) answers query (qlen bytes, as
 * lb_dns_query wrote it: its question ends the message). On ANSWER,
 * *rcode (0..15) and *answers (the answer count) are set. Names compare
 * without case (RFC 4343); type and class exactly. */
enum hc_dns_match hc_dns_match(const uint8_t *query, size_t qlen, const uint8_t *msg,
                               size_t len, int *rcode, unsigned *answers);
/* "truncated header", "wrong id", "not a response", "question mismatch". */
const char *hc_dns_match_name(enum hc_dns_match m);

/* One probe's exchange; spec must outlive it. */
struct hc_dgram {
    const struct hc_spec *spec;
    uint8_t out[HC_DGRAM_OUT_MAX];  /* the datagram to send */
    size_t out_len;
    unsigned ignored;               /* dns: datagrams that were not the answer */
    enum hc_dns_match last_ignored; /* ... the last one's reason */
};

/* Fills d for a probe of spec (kind dns or udp): the query with id, or
 * check_send. -1 when the query cannot be built (a name conf/ refuses). */
int hc_dgram_begin(struct hc_dgram *d, const struct hc_spec *spec, uint16_t id);

/* A datagram of len bytes came, its first n (n <= len, n <= HC_DGRAM_IN_MAX)
 * in buf. true: the verdict, in *passed and detail ("rcode NOERROR, 1
 * answer", "rcode REFUSED", "reply \"PONG\\r\\n\" (6 bytes)"); false: it
 * was not the answer (dns), wait for another. */
bool hc_dgram_reply(struct hc_dgram *d, const uint8_t *buf, size_t n, size_t len, bool *passed,
                    char *detail, size_t detail_len);

/* The detail of a probe that got no verdict in timeout_ms: "timeout: no
 * reply in 300 ms", or with the datagrams ignored "timeout: no answer in
 * 300 ms (2 replies ignored, the last: wrong id)". */
void hc_dgram_timeout(const struct hc_dgram *d, uint64_t timeout_ms, char *detail,
                      size_t detail_len);

#endif /* HC_DGRAM_H */
