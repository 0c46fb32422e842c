# Shared by every snippet checker (POSIX awk). The snippet's checker declares, in BEGIN, each
# line the program must print (want, computed there from P processes x L devices) and each
# line it may print only in a given form (want_match); every other line is an error.
#   want(line)          exactly this line, once (want(line, n): n times)
#   want_match(re, n)   n lines matching the regular expression re
BEGIN { N = P * L; failures = 0 }
function want(line, n) { exact[line] += (n == "" ? 1 : n) }
function want_match(re, n) { npat++; pat[npat] = re; pat_want[npat] = (n == "" ? 1 : n) }
function fail(msg) { print "FAIL: " msg; failures++ }
{ got[NR] = $0 }
END {
    for (i = 1; i <= NR; i++) {
        line = got[i]
        if (line in exact) { seen[line]++; continue }
        for (k = 1; k <= npat; k++)
            if (line ~ pat[k]) { pat_seen[k]++; break }
        if (k > npat)
            fail("unexpected line: " line)
    }
    for (line in exact)
        if (seen[line] + 0 != exact[line])
            fail("expected " exact[line] " time(s), got " (seen[line] + 0) ": " line)
    for (k = 1; k <= npat; k++)
        if (pat_seen[k] + 0 != pat_want[k])
            fail("expected " pat_want[k] " line(s) matching /" pat[k] "/, got " (pat_seen[k] + 0))
    if (failures) { print failures " check(s) failed"; exit 1 }
    print "checked: " NR " line(s) against values computed for " P " x " L
}
