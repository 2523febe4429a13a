/*
 * dgram.c - the datagram checks' exchange (dgram.h): what a probe sends,
 * and the verdict on what comes back. Pure: no I/O, no clock, any thread.
 */
#include <stdio.h>
#include <string.h>

#include "dgram.h"

/* What a detail shows of a udp reply, escaped and cut with "...": the
 * rest of the detail, its longest words included, must fit
 * HC_DETAIL_MAX. */
#define HC_DGRAM_SHOWN 88
_Static_assert(HC_DGRAM_SHOWN + 70 <= HC_DETAIL_MAX, "a udp detail is cut");

int
hc_dgram_begin(struct hc_dgram *d, const struct hc_spec *spec, uint16_t id)
{
    int n;

    memset(d, 0, sizeof(*d));
    d->spec = spec;
    if (spec->kind == CONF_CHECK_UDP) {
        if (spec->send_len > sizeof(d->out))
            return -1;
        if (spec->send_len > 0)         /* send may be NULL then */
            memcpy(d->out, spec->send, spec->send_len);
        d->out_len = spec->send_len;
        return 0;
    }
    n = lb_dns_query(d->out, sizeof(d->out), id, spec->dns_name, spec->dns_type, true, 0);
    if (n < 0)
        return -1;
    d->out_len = (size_t)n;
    return 0;
}

static bool
hc_dgram_dns(struct hc_dgram *d, const uint8_t *buf, size_t n, bool *passed, char *detail,
             size_t detail_len)
{
    char name[LB_DNS_TEXT_MAX];
    unsigned answers = 0;
    int rcode = 0;
    enum hc_dns_match m = hc_dns_match(d->out, d->out_len, buf, n, &rcode, &answers);

    if (m != HC_DNS_ANSWER) {
        d->ignored++;
        d->last_ignored = m;
        return false;
    }
    lb_dns_rcode_text(rcode, name, sizeof(name));
    *passed = (d->spec->dns_rcodes >> rcode) & 1;
    if (*passed)
        snprintf(detail, detail_len, "rcode %s, %u answer%s", name, answers,
                 answers == 1 ? "" : "s");
    else
        snprintf(detail, detail_len, "rcode %s", name);
    return true;
}

bool
hc_dgram_reply(struct hc_dgram *d, const uint8_t *buf, size_t n, size_t len, bool *passed,
               char *detail, size_t detail_len)
{
    const struct hc_spec *sp = d->spec;
    char text[HC_DGRAM_SHOWN];

    if (sp->kind == CONF_CHECK_DNS)
        return hc_dgram_dns(d, buf, n, passed, detail, detail_len);
    /* The reply as check_expect_bytes would write it: the operator
     * compares the two at a glance. */
    conf_bytes_text(buf, n, text, sizeof(text));
    *passed = sp->expect_bytes_len == 0 ||
              (n >= sp->expect_bytes_len && memcmp(buf, sp->expect_bytes, sp->expect_bytes_len) == 0);
    snprintf(detail, detail_len, "reply \"%s\" (%zu byte%s)%s", text, len, len == 1 ? "" : "s",
             *passed ? "" : " does not start with check_expect_bytes");
    return true;
}

void
hc_dgram_timeout(const struct hc_dgram *d, uint64_t timeout_ms, char *detail, size_t detail_len)
{
    if (d->ignored == 0)
        snprintf(detail, detail_len, "timeout: no reply in %llu ms",
                 (unsigned long long)timeout_ms);
    else
        snprintf(detail, detail_len, "timeout: no answer in %llu ms (%u repl%s ignored, the "
                 "last: %s)", (unsigned long long)timeout_ms, d->ignored,
                 d->ignored == 1 ? "y" : "ies", hc_dns_match_name(d->last_ignored));
}
