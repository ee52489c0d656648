
a1"7èB0
stale-grantstat"a/f(
08BfJattr(a)Rok