/*
 * fuzz_bal_saved.c - a state file's lines as lb reads them at start
 * (balancer/saved.c): any bytes, one line (cut at its first NUL or line
 * end, as the reader hands lines over).
 *
 * Checked: a line the parser accepts formats back to exactly itself (the
 * format has one spelling for each state), names and the address hold no
 * blank, and a refusal says why. The header likewise: accepted only as
 * "lb-state 1 " and a non-negative number.
 */
#include "bal.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char line[600], out[700], err[128];
    struct bal_saved s;
    size_t n = 0;
    double t = -1;

    while (n < size && n < sizeof(line) - 1 && data[n] != '\0' && data[n] != '\n')
        n++;
    memcpy(line, data, n);
    line[n] = '\0';
    err[0] = '\0';
    if (bal_saved_parse(line, &s, err, sizeof(err)) == 0) {
        size_t k = bal_saved_format(out, sizeof(out), &s);

        FUZZ_CHECK(k > 0 && out[k - 1] == '\n');
        out[k - 1] = '\0';
        FUZZ_CHECK(strcmp(out, line) == 0);
        FUZZ_CHECK(strchr(s.pool, ' ') == NULL && strchr(s.name, ' ') == NULL &&
                   strchr(s.addr, ' ') == NULL);
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    if (bal_saved_header(line, &t) == 0)
        FUZZ_CHECK(strncmp(line, "lb-state 1 ", 11) == 0 && t >= 0);
    return 0;
}
