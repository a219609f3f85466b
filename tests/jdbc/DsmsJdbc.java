// A JDBC client of `dsms server` for tests/test_server_jdbc.py: run as a single-file program
// (java -cp postgresql.jar DsmsJdbc.java URL) it prints what it read, one line per value.
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;

public class DsmsJdbc {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], "dsms", "")) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE STREAM trades (sym VARCHAR, qty BIGINT, price DECIMAL(10, 2), ts TIMESTAMP(3)) "
                          + "WITH (connector = 'memory')");
                s.execute("CREATE MATERIALIZED VIEW per_sym AS SELECT sym, SUM(qty) AS qty, COUNT(*) AS n "
                          + "FROM trades GROUP BY sym");
            }
            // Parameters bound by the driver; past prepareThreshold (5) it runs a named server-side statement.
            try (PreparedStatement insert = c.prepareStatement("INSERT INTO trades VALUES (?, ?, ?, ?)")) {
                for (int i = 0; i < 8; i++) {
                    insert.setString(1, i % 2 == 0 ? "a" : "o'b");
                    insert.setLong(2, i + 1);
                    insert.setBigDecimal(3, new BigDecimal(i + ".25"));
                    insert.setTimestamp(4, Timestamp.valueOf("2024-01-01 00:00:0" + i));
                    insert.executeUpdate();
                }
            }
            try (Statement s = c.createStatement()) {
                s.execute("FLUSH");
            }
            try (PreparedStatement pull = c.prepareStatement("SELECT qty, n FROM per_sym WHERE sym = ?")) {
                for (int i = 0; i < 6; i++) {
                    pull.setString(1, i % 2 == 0 ? "a" : "o'b");
                    try (ResultSet r = pull.executeQuery()) {
                        while (r.next()) {
                            System.out.println("pull " + i + " " + r.getLong(1) + " " + r.getLong(2));
                        }
                    }
                }
            }
            try (PreparedStatement typed = c.prepareStatement(
                    "SELECT sym, price, ts FROM trades WHERE qty = ?")) {
                typed.setLong(1, 4);
                try (ResultSet r = typed.executeQuery()) {
                    while (r.next()) {
                        System.out.println("row " + r.getString(1) + " " + r.getBigDecimal(2) + " " + r.getTimestamp(3)
                                           + " " + r.getMetaData().getColumnTypeName(2));
                    }
                }
            }
            DatabaseMetaData meta = c.getMetaData();
            System.out.println("product " + meta.getDatabaseProductName() + " " + meta.getDatabaseMajorVersion());
            try (ResultSet r = meta.getTables(null, "public", "%", null)) {
                while (r.next()) {
                    System.out.println("table " + r.getString("TABLE_NAME") + " " + r.getString("TABLE_TYPE"));
                }
            }
            try (ResultSet r = meta.getColumns(null, "public", "trades", "%")) {
                while (r.next()) {
                    System.out.println("column " + r.getString("COLUMN_NAME") + " " + r.getString("TYPE_NAME"));
                }
            }
            try (Statement s = c.createStatement()) {
                s.executeQuery("SELECT nope FROM per_sym");
            } catch (SQLException e) {
                System.out.println("error " + e.getSQLState() + " " + e.getMessage().split("\n")[0]);
            }
        }
    }
}
