// Test helper for tests/unit/test_placement.py (kafkalite).
//
// Reads group ids from standard input, one per line, each written as the hex
// of its UTF-8 bytes (an empty line is the empty id), and prints for each one
// "<String.hashCode()> <abs> <abs % partitions>", where abs is the way Kafka's
// Utils.abs treats Integer.MIN_VALUE (it maps it to 0). The partition count is
// the first command-line argument (default 50).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

public final class Placement {
    private Placement() {
    }

    static int kafkaAbs(int n) {
        return (n == Integer.MIN_VALUE) ? 0 : Math.abs(n);
    }

    static byte[] unhex(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        int partitions = args.length > 0 ? Integer.parseInt(args[0]) : 50;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintWriter out = new PrintWriter(System.out);
        String line;
        while ((line = in.readLine()) != null) {
            String id = new String(unhex(line.trim()), StandardCharsets.UTF_8);
            int h = id.hashCode();
            int a = kafkaAbs(h);
            out.println(h + " " + a + " " + (a % partitions));
        }
        out.flush();
    }
}
