
buildsetattr-lookupk1(b;
k1 /usr/src/linux-source-6.1.tar.xz/tmp/a.patch*quietzauto