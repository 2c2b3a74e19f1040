#!/bin/sh
# docrefs.sh: make doc comments cite the documents in docs/ instead of the
# reference specification, which is not part of the repository.
#
#   scripts/docrefs.sh          rewrite every citation in place (idempotent)
#   scripts/docrefs.sh --check  list citations of spec files; exit 1 if any
#
# It works on the tracked *.go files and *.md files (docs/compat.md excepted:
# it discusses the spec itself). A citation is "<spec>.md §N[.M]" (optionally
# "spec: " or "shared/spec/" before it, possibly broken across comment lines),
# or a bare "§N" that refers to the spec cited last in the same file (or, with
# none, the spec of the package). scripts/docrefs.map gives the in-repo
# document and section title for each; "(paxos.md §3.3 step 10)" becomes
# "(docs/paxos.md "Acquire algorithm" step 10)". Add a line to the map for a
# section it lacks (it falls back to the parent section, with a warning).
set -eu
cd "$(dirname "$0")/.."
mode=apply
[ "${1:-}" = "--check" ] && mode=check
if git rev-parse --git-dir >/dev/null 2>&1; then
	files=$(git ls-files '*.go' '*.md' | grep -v '^docs/compat\.md$' || true)
else
	files=$(find . -name '*.go' -o -name '*.md' | grep -v '^\./docs/compat\.md$' | sed 's|^\./||')
fi
# shellcheck disable=SC2086
exec perl -CSD -Mutf8 -e '
use strict; use warnings;
my ($mode, $mapfile, @files) = @ARGV;
my %map;
open my $m, "<:encoding(UTF-8)", $mapfile or die "$mapfile: $!\n";
while (<$m>) {
	chomp; next if /^\s*(#|$)/;
	my ($k, $d, $h) = split /\t/, $_, 3;
	$map{$k} = [$d, $h // ""];
}
my %rev = ("protocol" => "wire", "ondisk" => "ondisk", "delta" => "delta", "paxos" => "paxos",
	"cli" => "cli", "wdmd" => "wdmd", "timing" => "delta");
my %pkg = (delta => "delta", paxos => "paxos", diskfmt => "ondisk", client => "wire",
	daemon => "wire", lease => "wire", wdmd => "wdmd", cmd => "cli", testdisk => "delta");
my $NUM = qr/\d+(?:\.\d+)*/;
my $SEC = qr/§$NUM[a-z]?(?:–§?$NUM)?/;
my $BRK = qr/(?:[ \t]*\n[ \t]*(?:\/\/|\#)?)?[ \t]*/;
my $SPEC = qr/wire|ondisk|delta|paxos|wdmd|cli|timeouts?/;
my $TOK = qr{
	(?<docs>docs/(?<dfile>protocol|ondisk|delta|paxos|cli|wdmd|timing)\.md)
	| (?<![\w/.\-])(?<pre>(?:[Ss]pec:[ \t]+)?(?:(?:shared/)?spec/)?)(?<file>$SPEC)\.md\b(?:(?<brk>$BRK)(?<sec>$SEC))?
	| (?<bpre>\b[Ss]pec[ \t]+)?(?<bare>$SEC)
}x;
my $bad = 0;

sub lookup1 {	# (spec, "N.M") -> [doc, title]
	my ($spec, $n, $where) = @_;
	my $k = "$spec §$n";
	return $map{$k} if $map{$k};
	(my $m = $n) =~ s/[a-z]$//;
	while ($m =~ s/\.\d+$//) {
		if ($map{"$spec §$m"}) { warn "$where: $k not in map, using §$m\n"; return $map{"$spec §$m"}; }
	}
	warn "$where: $k not in map, citing the whole document\n";
	return $map{$spec} // die "$where: no map entry for $spec\n";
}
sub lookup {	# (spec, "§A" or "§A–B") -> (doc, quoted titles or "")
	my ($spec, $sec, $where) = @_;
	(my $s = $sec) =~ s/§//g;
	if (my $e = $map{"$spec §" . ($sec =~ s/^§//r)}) { return ($e->[0], $e->[1] eq "" ? "" : "\"$e->[1]\""); }
	my ($a, $b) = split /–/, $s;
	my $ea = lookup1($spec, $a, $where);
	my $t = $ea->[1] eq "" ? "" : "\"$ea->[1]\"";
	if (defined $b) {
		my $eb = lookup1($spec, $b, $where);
		$t .= "–\"$eb->[1]\"" if $eb->[0] eq $ea->[0] && $eb->[1] ne $ea->[1] && $eb->[1] ne "" && $t ne "";
	}
	return ($ea->[0], $t);
}

# wrap breaks comment lines that a citation made longer than 100 columns
# (tabs count 4) at a blank outside a "title", moving the tail to the start
# of the next line of the same comment paragraph (or to a new line); a line
# that grows this way is wrapped in turn.
sub width { my $l = shift; $l =~ s/\t/    /g; return length $l; }
sub cutpos {
	my ($line, $plen) = @_;
	my ($cut, $q) = (-1, 0);
	for my $k ($plen .. length($line) - 1) {
		my $ch = substr($line, $k, 1);
		$q = !$q if $ch eq "\"";
		last if width(substr($line, 0, $k)) > 100;
		$cut = $k if $ch eq " " && !$q;
	}
	return $cut;
}
sub wrap {
	my @l = split /\n/, shift, -1;
	my %grown;
	for (my $i = 0; $i < @l; $i++) {
		my ($p) = $l[$i] =~ m{^([ \t]*// )\S};
		next unless defined $p && width($l[$i]) > 100
			&& ($grown{$i} || $l[$i] =~ m{docs/\w+\.md});
		my $cut = cutpos($l[$i], length $p);
		next if $cut <= length $p;
		my $tail = substr($l[$i], $cut + 1);
		$l[$i] = substr($l[$i], 0, $cut);
		if ($i + 1 < @l && $l[$i + 1] =~ m{^\Q$p\E\S} && $l[$i + 1] !~ m{^\Q$p\E(?:[-*]|\d+\.) }) {
			$l[$i + 1] = $p . $tail . " " . substr($l[$i + 1], length $p);
		} else {
			splice @l, $i + 1, 0, $p . $tail;
		}
		$grown{$i + 1} = 1;
	}
	return join "\n", @l;
}

for my $f (@files) {
	next if $f =~ m{^scripts/docrefs};
	open my $fh, "<:encoding(UTF-8)", $f or next;
	local $/; my $in = <$fh>; close $fh;
	if ($mode eq "check") {
		my $ln = 0;
		for my $line (split /\n/, $in) {
			$ln++;
			if ($line =~ /§|(?<![\w\/.\-])(?:$SPEC)\.md\b/) {
				print "$f:$ln: $line\n"; $bad = 1;
			}
		}
		next;
	}
	# A bare section before the first citation of a spec file belongs to
	# that first one, or else to the spec of the package.
	my ($top) = $f =~ m{^([^/]+)/};
	my $cur = defined $top ? $pkg{$top} : undef;
	$cur = $1 if $in =~ /(?<![\w\/.\-])(?:[Ss]pec:[ \t]+)?(?:(?:shared\/)?spec\/)?($SPEC)\.md/;
	$cur = "timeouts" if defined $cur && $cur eq "timeout";
	my $out = ""; my $pos = 0; my ($lastend, $lastdoc, $lasttitle);
	while ($in =~ /$TOK/g) {
		my ($s, $e) = ($-[0], $+[0]);
		my %c = %+;
		my $line = 1 + (substr($in, 0, $s) =~ tr/\n//);
		my $where = "$f:$line";
		my $rep;
		if (defined $c{docs}) {
			$cur = $rev{$c{dfile}}; $lastend = $e; $lastdoc = "docs/$c{dfile}.md"; $lasttitle = undef;
			next;
		} elsif (defined $c{file}) {
			my $spec = $c{file} =~ /^timeout/ ? "timeouts" : $c{file};
			$cur = $spec;
			my $pre = ($c{pre} // "") =~ /^Spec:/ ? "See " : "";
			if (defined $c{sec}) {
				my ($doc, $t) = lookup($spec, $c{sec}, $where);
				$rep = $pre . $doc . ($t eq "" ? "" : $c{brk} . $t);
				$lastdoc = $doc; $lasttitle = $t;
			} else {
				my $doc = ($map{$spec} // die "$where: no map entry for $spec\n")->[0];
				$rep = $pre . $doc; $lastdoc = $doc; $lasttitle = "";
			}
		} else {
			# "§6 #N" is always a command of the wire protocol.
			my $spec = substr($in, $e, 3) =~ /^ #\d/ && $c{bare} eq "§6" ? "wire" : $cur;
			unless (defined $spec) { warn "$where: bare $c{bare} with no spec to refer to\n"; $bad = 1; next; }
			my ($doc, $t) = lookup($spec, $c{bare}, $where);
			my $gap = defined $lastend && $lastend <= $s ? substr($in, $lastend, $s - $lastend) : undef;
			my $cont = defined $gap && !defined $c{bpre} && $gap !~ /[():]|\.\s|\n\s*(?:\/\/)?\s*\n/
				&& length($gap) <= 80 && defined $lastdoc && $lastdoc eq $doc && $t ne "";
			my $pre = ($c{bpre} // "") =~ /^S/ ? "See " : "";
			if ($cont && defined $lasttitle && $t eq $lasttitle && $gap =~ /^\s*,\s*$/) {
				# "§5, §7" of one title: cite it once.
				$pos = $e; $lastend = $e;
				next;
			}
			$rep = $cont ? $t : $pre . $doc . ($t eq "" ? "" : " $t");
			$lastdoc = $doc; $lasttitle = $t;
		}
		$out .= substr($in, $pos, $s - $pos) . $rep;
		$pos = $e; $lastend = $e;
	}
	$out .= substr($in, $pos);
	$out = wrap($out) if $f =~ /\.go$/ && $out ne $in;
	if ($out ne $in) {
		open my $w, ">:encoding(UTF-8)", $f or die "$f: $!\n";
		print $w $out; close $w;
		print "rewrote $f\n";
	}
}
exit $bad;
' "$mode" scripts/docrefs.map $files
