# Shared by the benchmark scripts (sourced).
# The median of the numbers on standard input, separated by spaces or lines.
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
