import Foundation
import CLibPQ

/// `relayd users` on coturn's PostgreSQL user database (docs/userdb.md), through libpq; every
/// value goes as a parameter (`PQexecParams`), never into the SQL text.
final class PostgresUserDatabaseWriter: UserDatabaseWriter {
    private let connection: OpaquePointer

    init(conninfo: String) throws(UserDatabaseFailure) {
        connection = try PostgresUserDatabase.connect(conninfo)
    }

    deinit { PQfinish(connection) }

    func execute(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) {
        _ = try run(statement, parameters)
    }

    func rows(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) -> [[String?]] {
        try run(statement, parameters)
    }

    private func run(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) -> [[String?]] {
        let copies = parameters.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        let values = copies.map { UnsafePointer($0) }
        let result = values.withUnsafeBufferPointer { buffer in
            PQexecParams(connection, statement.sql(postgres: true), Int32(parameters.count), nil, buffer.baseAddress, nil, nil, 0)
        }
        guard let result else { throw UserDatabaseFailure(description: "PostgreSQL: \(String(cString: PQerrorMessage(connection)))") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let message = String(cString: PQresultErrorMessage(result))
            throw UserDatabaseFailure(description: "PostgreSQL: \(message.trimmingCharacters(in: .newlines))")
        }
        var rows: [[String?]] = []
        for row in 0..<PQntuples(result) {
            rows.append(
                (0..<PQnfields(result)).map { column in
                    PQgetisnull(result, row, column) != 0 ? nil : String(cString: PQgetvalue(result, row, column))
                })
        }
        return rows
    }
}
