/*
 * dns_msg.c - the dns check's reading of a datagram (dgram.h): is it the
 * answer to the query, and with which rcode. Pure: no I/O, no clock, any
 * thread; unit-tested and fuzzed on its own.
 *
 * Only the header and the question are read, both at fixed places: the
 * question starts at byte 12, where nothing comes before it to be pointed
 * to, so an honest answer's question is never compressed and is compared
 * byte for byte with ours. The records after it are never looked at: the
 * rcode is the verdict, and a datagram that is short of its records (TC,
 * or cut by the prober's buffer) still has it.
 */
#include <ctype.h>
#include <string.h>

#include "dgram.h"
#include "lb_dns.h"
#include "lb_enum.h"

static const char *const hc_dns_match_names[] = {
    [HC_DNS_ANSWER] = "answer",
    [HC_DNS_SHORT] = "truncated header",
    [HC_DNS_WRONG_ID] = "wrong id",
    [HC_DNS_NOT_RESPONSE] = "not a response",
    [HC_DNS_QUESTION_MISMATCH] = "question mismatch",
};

enum hc_dns_match
hc_dns_match(const uint8_t *query, size_t qlen, const uint8_t *msg, size_t len, int *rcode,
             unsigned *answers)
{
    /* the question: the name, then type and class (4 bytes) */
    size_t name_end = qlen - 4;

    if (len < LB_DNS_HEADER_LEN)
        return HC_DNS_SHORT;
    if (lb_dns_get16(msg) != lb_dns_get16(query))
        return HC_DNS_WRONG_ID;
    if (!(lb_dns_get16(msg + 2) & LB_DNS_FLAG_QR))
        return HC_DNS_NOT_RESPONSE;
    if (lb_dns_get16(msg + 4) != 1 || len < qlen ||
        memcmp(msg + name_end, query + name_end, 4) != 0)
        return HC_DNS_QUESTION_MISMATCH;
    /* Label lengths are below 64, so tolower leaves them alone: the name
     * compares as one string. */
    for (size_t i = LB_DNS_HEADER_LEN; i < name_end; i++) {
        if (tolower(msg[i]) != tolower(query[i]))
            return HC_DNS_QUESTION_MISMATCH;
    }
    *rcode = lb_dns_get16(msg + 2) & 0xF;
    *answers = lb_dns_get16(msg + 6);
    return HC_DNS_ANSWER;
}

LB_ENUM_NAME(hc_dns_match_name, enum hc_dns_match, hc_dns_match_names, "unknown")
