
paramssetattr-lookup(R	
depthR
nopeÿÿÿÿÿÿÿÿÿ