/*
 * fuzz_dsc_msg.c - the parse of a DNS answer (dsc_msg_parse) on what a DNS
 * server, or anyone who can send to discovery's socket, may send.
 *
 * The input is the answer after its question: the harness writes a header
 * that matches the query (id 0x4242, one question "_web._tcp.svc.test",
 * SRV or A) with the flags and record counts of the input's first 7 bytes,
 * so that the fuzzer spends its time in the records. Whatever comes back
 * must be sane: only A, AAAA and SRV records, each name a host name of at
 * most 253 characters in lower case.
 */
#include <ctype.h>
#include <string.h>

#include "dsc_dns.h"
#include "fuzz.h"

static const char qname[] = "_web._tcp.svc.test";
static const uint8_t question[] = { 4, '_', 'w', 'e', 'b', 4, '_', 't', 'c', 'p', 3, 's', 'v',
                                    'c', 4, 't', 'e', 's', 't', 0 };

static void
check_name(const char *s)
{
    size_t n = strlen(s);

    FUZZ_CHECK(n <= 253);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.');
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(!isupper((unsigned char)s[i]));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t msg[70000];
    struct dsc_msg m;
    char err[96];
    uint16_t type;
    size_t n = 0;

    if (size < 7 || size > sizeof(msg) - 64)
        return 0;
    type = data[0] & 1 ? DSC_TYPE_SRV : DSC_TYPE_A;
    msg[n++] = 0x42;
    msg[n++] = 0x42;
    msg[n++] = 0x80 | (data[1] & 0x7F);     /* an answer, any other flags */
    msg[n++] = data[2];
    msg[n++] = 0;
    msg[n++] = 1;
    for (int i = 3; i < 6; i++) {           /* counts up to 255 * 4 */
        msg[n++] = data[i] >> 6;
        msg[n++] = data[i] << 2 | (data[6] & 3);
    }
    memcpy(msg + n, question, sizeof(question));
    n += sizeof(question);
    msg[n++] = 0;
    msg[n++] = (uint8_t)type;
    msg[n++] = 0;
    msg[n++] = 1;
    memcpy(msg + n, data + 7, size - 7);
    n += size - 7;

    if (dsc_msg_parse(msg, n, 0x4242, qname, type, &m, err, sizeof(err)) != 0) {
        FUZZ_CHECK(err[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(m.nrrs <= m.cap);
    FUZZ_CHECK(!m.is_truncated || m.nrrs == 0);
    for (size_t i = 0; i < m.nrrs; i++) {
        const struct dsc_rr *rr = &m.rrs[i];

        FUZZ_CHECK(rr->type == DSC_TYPE_A || rr->type == DSC_TYPE_AAAA ||
                   rr->type == DSC_TYPE_SRV);
        FUZZ_CHECK(rr->section >= 1 && rr->section <= 3);
        check_name(rr->owner);
        FUZZ_CHECK(rr->owner[0] != '\0');
        if (rr->type == DSC_TYPE_SRV) {
            check_name(rr->target);
            FUZZ_CHECK(rr->target[0] != '\0');
        }
    }
    dsc_msg_fini(&m);
    return 0;
}
