/* Tests health/dns_msg.c: which datagrams answer a query. The answer
 * dnsmasq 2.90 gave to the query below (captured), then the same bytes
 * changed one way at a time: each change is told apart (wrong id, not a
 * response, a question that differs in name, type, class or count, cut
 * short), and the changes that do not matter (case, TC, records after the
 * question, any rcode) still match. */
#include <string.h>

#include "check.h"
#include "dgram.h"

/* example.test SOA, id 0x1d2c, RD: what lb_dns_query writes for the dns
 * check (test_answer checks it) */
static const uint8_t query[] = {
    0x1d, 0x2c, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x07, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0x04, 't', 'e', 's', 't', 0x00,
    0x00, 0x06, 0x00, 0x01,
};

/* dnsmasq 2.90 --auth-zone=example.test: AA, one SOA answer (its names
 * not compressed), rcode NOERROR */
static const uint8_t answer[] = {
    0x1d, 0x2c, 0x85, 0x80, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x04, 0x74, 0x65, 0x73,
    0x74, 0x00, 0x00, 0x06, 0x00, 0x01, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70,
    0x6c, 0x65, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x06, 0x00, 0x01,
    0x00, 0x00, 0x02, 0x58, 0x00, 0x41, 0x02, 0x6e, 0x73, 0x07, 0x65, 0x78,
    0x61, 0x6d, 0x70, 0x6c, 0x65, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x0a,
    0x68, 0x6f, 0x73, 0x74, 0x6d, 0x61, 0x73, 0x74, 0x65, 0x72, 0x02, 0x6e,
    0x73, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x04, 0x74, 0x65,
    0x73, 0x74, 0x00, 0x6b, 0x12, 0xe9, 0x0c, 0x00, 0x00, 0x04, 0xb0, 0x00,
    0x00, 0x00, 0xb4, 0x00, 0x12, 0x75, 0x00, 0x00, 0x00, 0x02, 0x58,
};

static enum hc_dns_match
match(const uint8_t *msg, size_t len, int *rcode, unsigned *answers)
{
    return hc_dns_match(query, sizeof(query), msg, len, rcode, answers);
}

static void
test_answer(void)
{
    uint8_t m[sizeof(answer)];
    uint8_t q[LB_DNS_QUERY_MAX];
    unsigned answers = 99;
    int rcode = 99;

    CHECK_EQ_INT(lb_dns_query(q, sizeof(q), 0x1d2c, "example.test", 6, true, 0), sizeof(query));
    CHECK(memcmp(q, query, sizeof(query)) == 0);
    CHECK_EQ_INT(match(answer, sizeof(answer), &rcode, &answers), HC_DNS_ANSWER);
    CHECK_EQ_INT(rcode, 0);
    CHECK_EQ_INT(answers, 1);
    /* the header and the question are enough: records cut or absent */
    CHECK_EQ_INT(match(answer, sizeof(query), &rcode, &answers), HC_DNS_ANSWER);
    /* any rcode and flags; TC; the name in another case */
    memcpy(m, answer, sizeof(m));
    m[2] |= 0x02;                       /* TC */
    m[3] = 0x85;                        /* REFUSED, RA */
    m[7] = 0;
    m[13] = 'E';
    m[24] = 'T';
    CHECK_EQ_INT(match(m, sizeof(m), &rcode, &answers), HC_DNS_ANSWER);
    CHECK_EQ_INT(rcode, 5);
    CHECK_EQ_INT(answers, 0);
    m[3] = 0x8f;
    CHECK_EQ_INT(match(m, sizeof(m), &rcode, &answers), HC_DNS_ANSWER);
    CHECK_EQ_INT(rcode, 15);
}

static void
test_not_ours(void)
{
    static const struct { size_t at; uint8_t value; enum hc_dns_match want; } cases[] = {
        { 0, 0x1e, HC_DNS_WRONG_ID },
        { 1, 0x2d, HC_DNS_WRONG_ID },
        { 2, 0x05, HC_DNS_NOT_RESPONSE },           /* QR clear: a query */
        { 5, 0x00, HC_DNS_QUESTION_MISMATCH },      /* no question */
        { 5, 0x02, HC_DNS_QUESTION_MISMATCH },
        { 4, 0x01, HC_DNS_QUESTION_MISMATCH },      /* 257 questions */
        { 14, 'y', HC_DNS_QUESTION_MISMATCH },      /* another name */
        { 20, 0x05, HC_DNS_QUESTION_MISMATCH },     /* another label split */
        { 12, 0xc0, HC_DNS_QUESTION_MISMATCH },     /* compressed: points nowhere */
        { 27, 0x01, HC_DNS_QUESTION_MISMATCH },     /* type A */
        { 29, 0x03, HC_DNS_QUESTION_MISMATCH },     /* class CH */
    };
    uint8_t m[sizeof(answer)];
    unsigned answers = 99;
    int rcode = 99;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(m, answer, sizeof(m));
        m[cases[i].at] = cases[i].value;
        CHECK_EQ_INT(match(m, sizeof(m), &rcode, &answers), cases[i].want);
    }
    CHECK_EQ_INT(rcode, 99);                        /* untouched */
    CHECK_EQ_INT(answers, 99);
    for (size_t n = 0; n < LB_DNS_HEADER_LEN; n++)
        CHECK_EQ_INT(match(answer, n, &rcode, &answers), HC_DNS_SHORT);
    for (size_t n = LB_DNS_HEADER_LEN; n < sizeof(query); n++)
        CHECK_EQ_INT(match(answer, n, &rcode, &answers), HC_DNS_QUESTION_MISMATCH);
    CHECK_EQ_STR(hc_dns_match_name(HC_DNS_SHORT), "truncated header");
    CHECK_EQ_STR(hc_dns_match_name(HC_DNS_WRONG_ID), "wrong id");
    CHECK_EQ_STR(hc_dns_match_name(HC_DNS_NOT_RESPONSE), "not a response");
    CHECK_EQ_STR(hc_dns_match_name(HC_DNS_QUESTION_MISMATCH), "question mismatch");
}

/* Case folds in the name only: type 65 (HTTPS, 0x41 'A') is not type 97
 * (0x61 'a'), and a length byte is not a letter. */
static void
test_case_only_in_names(void)
{
    uint8_t q[64], m[64];
    unsigned answers;
    int rcode, n = lb_dns_query(q, sizeof(q), 7, "a.b", 65, true, 0);

    CHECK(n > 0);
    memcpy(m, q, (size_t)n);
    m[2] |= 0x80;
    CHECK_EQ_INT(hc_dns_match(q, (size_t)n, m, (size_t)n, &rcode, &answers), HC_DNS_ANSWER);
    m[n - 3] = 97;
    CHECK_EQ_INT(hc_dns_match(q, (size_t)n, m, (size_t)n, &rcode, &answers),
                 HC_DNS_QUESTION_MISMATCH);
    /* the root: a name of one byte */
    n = lb_dns_query(q, sizeof(q), 7, ".", 6, true, 0);
    memcpy(m, q, (size_t)n);
    m[2] |= 0x80;
    CHECK_EQ_INT(hc_dns_match(q, (size_t)n, m, (size_t)n, &rcode, &answers), HC_DNS_ANSWER);
    m[12] = 'a';
    CHECK_EQ_INT(hc_dns_match(q, (size_t)n, m, (size_t)n, &rcode, &answers),
                 HC_DNS_QUESTION_MISMATCH);
}

int
main(void)
{
    test_answer();
    test_not_ours();
    test_case_only_in_names();
    return CHECK_DONE();
}
