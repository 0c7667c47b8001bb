read -r _ u n s i w x y z < /proc/stat
"$@"
read -r _ u2 n2 s2 i2 w2 x2 y2 z2 < /proc/stat
tot=$(( (u2+n2+s2+i2+w2+x2+y2+z2) - (u+n+s+i+w+x+y+z) ))
echo "busy $(( 100 * (tot - (i2-i) - (w2-w)) / tot ))% of 2 cores over the whole script"
