/* Tests discover/dsc_msg.c: the query discovery sends, and the parse of
 * answers built by hand (compression, several sections, CNAME skipped),
 * truncated, malformed and hostile ones (pointer loops, forward pointers,
 * records longer than the message, bad rdata lengths). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "dsc_dns.h"
#include "lb_dns.h"

/* An answer under construction: header, question, then records. */
struct msg {
    uint8_t b[4096];
    size_t n;
};

static void
put8(struct msg *m, unsigned v)
{
    m->b[m->n++] = (uint8_t)v;
}

static void
put16(struct msg *m, unsigned v)
{
    put8(m, v >> 8);
    put8(m, v & 0xff);
}

static void
put32(struct msg *m, unsigned long v)
{
    put16(m, (unsigned)(v >> 16));
    put16(m, (unsigned)(v & 0xffff));
}

/* A name in labels, without compression. */
static void
put_name(struct msg *m, const char *name)
{
    while (*name != '\0') {
        const char *dot = strchr(name, '.');
        size_t len = dot != NULL ? (size_t)(dot - name) : strlen(name);

        put8(m, (unsigned)len);
        memcpy(m->b + m->n, name, len);
        m->n += len;
        name += len + (dot != NULL);
    }
    put8(m, 0);
}

/* Header and question; flags 0x8180 (answer, RD, RA, NOERROR). */
static void
start(struct msg *m, uint16_t id, unsigned flags, unsigned an, unsigned ns, unsigned ar,
      const char *qname, uint16_t qtype)
{
    m->n = 0;
    put16(m, id);
    put16(m, flags);
    put16(m, 1);
    put16(m, an);
    put16(m, ns);
    put16(m, ar);
    put_name(m, qname);
    put16(m, qtype);
    put16(m, 1);
}

static void
rr_head(struct msg *m, uint16_t type, unsigned rdlen)
{
    put16(m, type);
    put16(m, 1);
    put32(m, 30);
    put16(m, rdlen);
}

static void
test_query(void)
{
    uint8_t buf[512];
    int n = dsc_msg_query(buf, sizeof(buf), 0x1234, "_web._tcp.Example.", DSC_TYPE_SRV);
    static const uint8_t want_q[] = { 4, '_', 'w', 'e', 'b', 4, '_', 't', 'c', 'p', 7, 'E', 'x',
                                      'a', 'm', 'p', 'l', 'e', 0, 0, 33, 0, 1 };

    CHECK_EQ_INT(n, 12 + (int)sizeof(want_q) + 11);
    CHECK_EQ_INT(buf[0], 0x12);
    CHECK_EQ_INT(buf[1], 0x34);
    CHECK_EQ_INT(buf[2], 0x01);         /* RD */
    CHECK_EQ_INT(buf[5], 1);            /* QDCOUNT */
    CHECK_EQ_INT(buf[11], 1);           /* ARCOUNT: the OPT record */
    CHECK(memcmp(buf + 12, want_q, sizeof(want_q)) == 0);
    CHECK_EQ_INT(buf[12 + sizeof(want_q) + 2], 41);                      /* OPT */
    CHECK_EQ_INT((buf[12 + sizeof(want_q) + 3] << 8) | buf[12 + sizeof(want_q) + 4], DSC_UDP_MAX);

    CHECK_EQ_INT(dsc_msg_query(buf, sizeof(buf), 1, "", DSC_TYPE_A), -1);
    CHECK_EQ_INT(dsc_msg_query(buf, sizeof(buf), 1, "a..b", DSC_TYPE_A), -1);
    CHECK_EQ_INT(dsc_msg_query(buf, sizeof(buf),
                               1, "a234567890123456789012345678901234567890123456789012345678901234.x",
                               DSC_TYPE_A), -1);                         /* a 64-byte label */
    CHECK_EQ_INT(dsc_msg_query(buf, 20, 1, "example.com", DSC_TYPE_A), -1);
}

/* An SRV answer with two priorities, a compressed target, the additional
 * section's A and AAAA records, and a CNAME and a TXT that are skipped. */
static void
test_srv_answer(void)
{
    struct msg m;
    struct dsc_msg out;
    char err[128];
    size_t target_at;

    start(&m, 7, 0x8180, 3, 0, 3, "_web._tcp.example", DSC_TYPE_SRV);
    put16(&m, 0xC00C);                  /* owner: the question's name */
    rr_head(&m, DSC_TYPE_SRV, 6 + 11);
    put16(&m, 10);
    put16(&m, 5);
    put16(&m, 8080);
    target_at = m.n;
    put_name(&m, "a.example");          /* 11 bytes */
    put16(&m, 0xC00C);
    rr_head(&m, DSC_TYPE_SRV, 6 + 4);
    put16(&m, 20);
    put16(&m, 0);
    put16(&m, 8081);
    put8(&m, 1);
    put8(&m, 'b');
    put16(&m, (unsigned)(0xC000 | (target_at + 2)));   /* b. + "example" */
    put16(&m, 0xC00C);
    rr_head(&m, 5, 2);                  /* CNAME: skipped */
    put16(&m, (unsigned)(0xC000 | target_at));
    put16(&m, (unsigned)(0xC000 | target_at));
    rr_head(&m, DSC_TYPE_A, 4);
    put32(&m, 0x0A000001);
    put16(&m, (unsigned)(0xC000 | target_at));
    rr_head(&m, DSC_TYPE_AAAA, 16);
    for (int i = 0; i < 15; i++)
        put8(&m, 0);
    put8(&m, 1);
    put16(&m, (unsigned)(0xC000 | target_at));
    rr_head(&m, 16, 3);                 /* TXT: skipped */
    put8(&m, 2);
    put8(&m, 'h');
    put8(&m, 'i');

    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 7, "_WEB._tcp.example.", DSC_TYPE_SRV, &out, err,
                               sizeof(err)), 0);
    CHECK_EQ_INT(out.rcode, 0);
    CHECK(!out.is_truncated);
    CHECK_EQ_INT(out.nrrs, 4);
    if (out.nrrs == 4) {
        CHECK_EQ_INT(out.rrs[0].type, DSC_TYPE_SRV);
        CHECK_EQ_STR(out.rrs[0].owner, "_web._tcp.example");
        CHECK_EQ_STR(out.rrs[0].target, "a.example");
        CHECK_EQ_INT(out.rrs[0].priority, 10);
        CHECK_EQ_INT(out.rrs[0].weight, 5);
        CHECK_EQ_INT(out.rrs[0].port, 8080);
        CHECK_EQ_STR(out.rrs[1].target, "b.example");
        CHECK_EQ_INT(out.rrs[1].priority, 20);
        CHECK_EQ_INT(out.rrs[2].type, DSC_TYPE_A);
        CHECK_EQ_INT(out.rrs[2].section, 3);
        CHECK_EQ_STR(out.rrs[2].owner, "a.example");
        CHECK_EQ_INT(out.rrs[2].addr[0], 10);
        CHECK_EQ_INT(out.rrs[2].addr[3], 1);
        CHECK_EQ_INT(out.rrs[3].type, DSC_TYPE_AAAA);
        CHECK_EQ_INT(out.rrs[3].addr[15], 1);
    }
    dsc_msg_fini(&out);

    /* every cut of the message is refused, never read past */
    for (size_t cut = 0; cut < m.n; cut++)
        CHECK(dsc_msg_parse(m.b, cut, 7, "_web._tcp.example", DSC_TYPE_SRV, &out, err,
                            sizeof(err)) != 0);
}

static void
test_not_ours(void)
{
    struct msg m;
    struct dsc_msg out;
    char err[128];

    start(&m, 7, 0x8180, 0, 0, 0, "web.example", DSC_TYPE_A);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 8, "web.example", DSC_TYPE_A, &out, err, sizeof(err)), 1);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 7, "other.example", DSC_TYPE_A, &out, err, sizeof(err)),
                 1);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 7, "web.example", DSC_TYPE_AAAA, &out, err, sizeof(err)),
                 1);
    start(&m, 7, 0x0100, 0, 0, 0, "web.example", DSC_TYPE_A);   /* a query, not an answer */
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 7, "web.example", DSC_TYPE_A, &out, err, sizeof(err)), 1);
    CHECK_EQ_INT(dsc_msg_parse(m.b, 5, 7, "web.example", DSC_TYPE_A, &out, err, sizeof(err)), -1);
}

static void
test_rcode_and_truncation(void)
{
    struct msg m;
    struct dsc_msg out;
    char err[128], name[LB_DNS_TEXT_MAX];

    start(&m, 9, 0x8183, 0, 0, 0, "gone.example", DSC_TYPE_SRV);   /* NXDOMAIN */
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 9, "gone.example", DSC_TYPE_SRV, &out, err, sizeof(err)),
                 0);
    CHECK_EQ_INT(out.rcode, 3);
    CHECK_EQ_STR(lb_dns_rcode_text(out.rcode, name, sizeof(name)), "NXDOMAIN");
    dsc_msg_fini(&out);

    /* TC with a record cut short: no record read, ask over TCP */
    start(&m, 9, 0x8380, 5, 0, 0, "big.example", DSC_TYPE_SRV);
    put16(&m, 0xC00C);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 9, "big.example", DSC_TYPE_SRV, &out, err, sizeof(err)),
                 0);
    CHECK(out.is_truncated);
    CHECK_EQ_INT(out.nrrs, 0);
    dsc_msg_fini(&out);
}

static void
test_hostile(void)
{
    struct msg m;
    struct dsc_msg out;
    char err[128];
    size_t at;

    /* a pointer to itself */
    start(&m, 1, 0x8180, 1, 0, 0, "x.example", DSC_TYPE_A);
    at = m.n;
    put16(&m, (unsigned)(0xC000 | at));
    rr_head(&m, DSC_TYPE_A, 4);
    put32(&m, 1);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, "x.example", DSC_TYPE_A, &out, err, sizeof(err)), -1);

    /* a pointer forward */
    start(&m, 1, 0x8180, 1, 0, 0, "x.example", DSC_TYPE_A);
    put16(&m, (unsigned)(0xC000 | (m.n + 12)));
    rr_head(&m, DSC_TYPE_A, 4);
    put32(&m, 1);
    put_name(&m, "x.example");
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, "x.example", DSC_TYPE_A, &out, err, sizeof(err)), -1);

    /* an A record of 5 bytes */
    start(&m, 1, 0x8180, 1, 0, 0, "x.example", DSC_TYPE_A);
    put16(&m, 0xC00C);
    rr_head(&m, DSC_TYPE_A, 5);
    put32(&m, 1);
    put8(&m, 1);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, "x.example", DSC_TYPE_A, &out, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "A record of 5 bytes");

    /* rdata longer than the message */
    start(&m, 1, 0x8180, 1, 0, 0, "x.example", DSC_TYPE_A);
    put16(&m, 0xC00C);
    rr_head(&m, DSC_TYPE_A, 400);
    put32(&m, 1);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, "x.example", DSC_TYPE_A, &out, err, sizeof(err)), -1);

    /* an SRV target that runs past its rdata */
    start(&m, 1, 0x8180, 1, 0, 0, "s.example", DSC_TYPE_SRV);
    put16(&m, 0xC00C);
    rr_head(&m, DSC_TYPE_SRV, 6 + 3);
    put16(&m, 0);
    put16(&m, 0);
    put16(&m, 80);
    put8(&m, 5);
    put8(&m, 'a');
    put8(&m, 'b');
    put8(&m, 'c');
    put8(&m, 'd');
    put8(&m, 0);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, "s.example", DSC_TYPE_SRV, &out, err, sizeof(err)),
                 -1);

    /* a label with a space: not a host name, the record is skipped */
    start(&m, 1, 0x8180, 1, 0, 0, "s.example", DSC_TYPE_SRV);
    put16(&m, 0xC00C);
    rr_head(&m, DSC_TYPE_SRV, 6 + 5);
    put16(&m, 0);
    put16(&m, 0);
    put16(&m, 80);
    put8(&m, 3);
    put8(&m, 'a');
    put8(&m, ' ');
    put8(&m, 'b');
    put8(&m, 0);
    CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, "s.example", DSC_TYPE_SRV, &out, err, sizeof(err)), 0);
    CHECK_EQ_INT(out.nrrs, 0);
    dsc_msg_fini(&out);

    /* an owner of 257 bytes: a label of 63 and a pointer to the question's
     * name of 193 */
    {
        char qname[200];

        memset(qname, 'a', 191);
        qname[63] = qname[127] = '.';
        qname[191] = '\0';
        start(&m, 1, 0x8180, 1, 0, 0, qname, DSC_TYPE_A);
        CHECK_EQ_INT(m.n, 12 + 193 + 4);
        put8(&m, 63);
        for (int k = 0; k < 63; k++)
            put8(&m, 'b');
        put16(&m, 0xC00C);
        rr_head(&m, DSC_TYPE_A, 4);
        put32(&m, 1);
        CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, qname, DSC_TYPE_A, &out, err, sizeof(err)), -1);
        /* one byte shorter fits: 62 + 1 + 193 = 256 is still too long,
         * 61 gives 255 */
        start(&m, 1, 0x8180, 1, 0, 0, qname, DSC_TYPE_A);
        put8(&m, 61);
        for (int k = 0; k < 61; k++)
            put8(&m, 'b');
        put16(&m, 0xC00C);
        rr_head(&m, DSC_TYPE_A, 4);
        put32(&m, 1);
        CHECK_EQ_INT(dsc_msg_parse(m.b, m.n, 1, qname, DSC_TYPE_A, &out, err, sizeof(err)), 0);
        CHECK_EQ_INT(out.nrrs, 1);
        dsc_msg_fini(&out);
    }
}

int
main(void)
{
    test_query();
    test_srv_answer();
    test_not_ours();
    test_rcode_and_truncation();
    test_hostile();
    return CHECK_DONE();
}
