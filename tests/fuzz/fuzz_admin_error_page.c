/*
 * fuzz_admin_error_page.c - the rewriting of libevent's own HTML error
 * pages into JSON (lb_admin_error_page_json), on arbitrary bytes as the
 * admin connection's output buffer would hold them. Found by fuzzing it:
 * a status line without a CR in its first 64 bytes made the old rewriter
 * store through a NULL strchr().
 *
 * The first byte sizes the output buffer (1 to 511 bytes); the rest is the
 * buffer's content. Checked: nothing is written past the buffer (ASan) and
 * what is written is NUL-terminated at the returned length; a rewrite
 * happens only for a libevent error page (it starts "HTTP/1.", has a code
 * 400..999 and ends with libevent's closing tags); the rewrite keeps the
 * page's status line, says application/json and close, and its
 * Content-Length is the length of its body, one of three JSON errors.
 */
#include "admin_request.h"
#include "fuzz.h"

static const char *const fuzz_bodies[] = {
    "{\"error\":\"bad request\"}\n",
    "{\"error\":\"request body too large\"}\n",
    "{\"error\":\"method not implemented\"}\n",
};

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char page_end[] = "</BODY></HTML>\n";
    static const char headers[] = "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                                  "Content-Length: ";
    const char *in = (const char *)data + 1, *cr, *body, *cl;
    size_t len, outlen, n, status_len;
    char *out;
    bool known = false;

    if (size == 0)
        return 0;
    outlen = 1 + (size_t)data[0] * 2;
    len = size - 1;
    out = malloc(outlen);                   /* exact size: ASan sees overflows */
    FUZZ_CHECK(out != NULL);
    memset(out, 'u', outlen);
    n = lb_admin_error_page_json(in, len, out, outlen);
    if (n == 0) {
        free(out);
        return 0;
    }
    FUZZ_CHECK(n < outlen && out[n] == '\0' && strlen(out) == n);
    FUZZ_CHECK(len >= sizeof(page_end) - 1 &&
               memcmp(in + len - (sizeof(page_end) - 1), page_end, sizeof(page_end) - 1) == 0);
    FUZZ_CHECK(len > 12 && memcmp(in, "HTTP/1.", 7) == 0 && in[9] >= '4' && in[9] <= '9');
    /* the page's own status line, then our headers */
    cr = memchr(in, '\r', len);
    FUZZ_CHECK(cr != NULL);
    status_len = (size_t)(cr - in);
    FUZZ_CHECK(memcmp(out, in, status_len) == 0);
    FUZZ_CHECK(strncmp(out + status_len, headers, sizeof(headers) - 1) == 0);
    cl = out + status_len + sizeof(headers) - 1;
    body = strstr(cl, "\r\n\r\n");
    FUZZ_CHECK(body != NULL);
    body += 4;
    FUZZ_CHECK((size_t)strtoul(cl, NULL, 10) == strlen(body));
    for (size_t i = 0; i < sizeof(fuzz_bodies) / sizeof(fuzz_bodies[0]); i++)
        known = known || strcmp(body, fuzz_bodies[i]) == 0;
    FUZZ_CHECK(known);
    free(out);
    return 0;
}
