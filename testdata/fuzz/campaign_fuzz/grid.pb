
gridsetattr-lookuprename-lookuphost6.1"tmpfs"ext4(0d@èHXjfreep